"""A minimal HTTP/1.1 client for the benchmarks: JSON requests and SSE streams on one connection.

httpx saturated a core at ~300 requests/s here, so a benchmark driving the gateway through it
would mostly measure its own client. This one writes requests by hand and decodes chunked bodies
itself; it keeps its connection alive between requests (as a browser or SDK does) and reopens
it when the server closed it. Only what the gateway's responses use is supported: fixed-length
and chunked bodies. Not a general client: a benchmark helper.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Frame", "RawClient"]


@dataclass(frozen=True, slots=True)
class Frame:
    """One SSE event: when its bytes were read (``time.time()``), its id, type and data."""

    received_at: float
    event_id: str
    event: str
    data: str


class RawClient:
    """One keep-alive connection to ``base_url`` sending ``Authorization: Bearer <key>``."""

    def __init__(self, base_url: str, key: str) -> None:
        parts = urlsplit(base_url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._auth = f"Authorization: Bearer {key}\r\n"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        """Close the connection (if open)."""
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def _send(self, method: str, path: str, body: Any) -> tuple[bytes, asyncio.StreamReader]:
        if self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        assert self._reader is not None
        payload = b"" if body is None else json.dumps(body).encode()
        self._writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n{self._auth}"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        head = await self._reader.readuntil(b"\r\n\r\n")
        if b"\r\nconnection: close" in head.lower():
            self._writer = None  # reopened for the next request
        return head, self._reader

    async def json(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send a request; return its status and decoded JSON body."""
        head, reader = await self._send(method, path, body)
        status = int(head.split(b" ", 2)[1])
        lowered = head.lower()
        if b"transfer-encoding: chunked" in lowered:
            data = b"".join([chunk async for chunk in _chunks(reader)])
        else:
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            data = await reader.readexactly(length)
        return status, json.loads(data) if data else None

    async def stream(self, path: str, body: Any) -> AsyncIterator[Frame]:
        """POST ``body`` and yield the SSE frames of the ``200 text/event-stream`` answer until
        the server ends it; any other answer raises with its status line and body."""
        head, reader = await self._send("POST", path, body)
        if not head.startswith(b"HTTP/1.1 200") or b"chunked" not in head.lower():
            raise RuntimeError(f"not an event stream: {head[:200]!r}")
        pending = b""
        fields: dict[str, str] = {}
        ended = False
        try:
            async for chunk in _chunks(reader):
                now = time.time()
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    if raw:
                        name, _, value = raw.decode().partition(": ")
                        fields[name] = value
                        continue
                    if "data" in fields:
                        event_id, event = fields.get("id", ""), fields.get("event", "")
                        yield Frame(now, event_id, event, fields["data"])
                    fields = {}
            ended = True
        finally:
            if not ended:  # left mid-body: the connection cannot carry another request
                await self.close()


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The chunks of a chunked body, up to and without the terminating empty chunk."""
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            return
        yield chunk[:-2]
