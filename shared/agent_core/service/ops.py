"""Each service process's ops port: ``/healthz``, ``/readyz`` and ``/metrics`` over plain HTTP.

A port per process rather than the gateway aggregating: a scraper (or a compose healthcheck) then
sees each instance as it is — its own readiness, its own counters — even while the bus is down,
and nothing about metrics travels over the bus the metrics describe. The gateway serves the same
three routes on its API port instead of opening a second one.

The server answers ``GET`` of those three paths and nothing else; a request must arrive whole
within a few seconds and its head is bounded, so a stuck or hostile client costs one small task.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST

from agent_core.errors import ConfigError

__all__ = ["OpsServer", "Readiness"]

Readiness = Callable[[], Mapping[str, object]]  # must hold "ready": bool

_HEAD_LIMIT = 8192
_READ_TIMEOUT_S = 5.0


@dataclass
class OpsServer:
    """Serves the ops routes on ``host:port`` (``port=0``: any free port, see :attr:`port`)."""

    host: str
    port: int
    readiness: Readiness
    metrics: Callable[[], Awaitable[bytes]]
    _server: asyncio.Server | None = field(default=None, init=False)

    async def start(self) -> None:
        """Bind and serve; raise :class:`ConfigError` naming the port when it is taken."""
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port)
        except OSError as exc:
            raise ConfigError(
                "ops_port_in_use",
                f"ops port {self.host}:{self.port} (health and metrics) is not free: {exc.strerror}",
                details={"key": "observability.ops_port", "port": self.port},
            ) from exc
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop accepting; connections in progress finish on their own (they are short)."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            method, path = _request_line(head)
            status, ctype, body = await self._answer(method, path)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            status, ctype, body = 400, "text/plain", b"bad request\n"
        except Exception as exc:  # a failing collector must not take the port down
            status, ctype, body = 500, "text/plain", f"{type(exc).__name__}\n".encode()
        reason = {200: "OK", 503: "Service Unavailable", 404: "Not Found"}.get(status, "Error")
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    async def _answer(self, method: str, path: str) -> tuple[int, str, bytes]:
        if method != "GET":
            return 404, "text/plain", b"not found\n"
        if path == "/healthz":
            return 200, "application/json", b'{"status":"ok"}'
        if path == "/readyz":
            state = dict(self.readiness())
            body = json.dumps(state, default=str).encode()
            return (200 if state.get("ready") else 503), "application/json", body
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, await self.metrics()
        return 404, "text/plain", b"not found\n"


def _request_line(head: bytes) -> tuple[str, str]:
    if len(head) > _HEAD_LIMIT:
        raise ValueError("request head too large")
    method, path, _ = head.split(b"\r\n", 1)[0].decode("ascii").split(" ", 2)
    return method, path.split("?", 1)[0]
