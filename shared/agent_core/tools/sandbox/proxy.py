"""Network for sandboxed code host by host: a worker-side proxy the sandbox is forced through.

A sandbox keeps its own network namespace, which holds only its loopback: no route out. With
``sandbox.allowed_hosts`` the worker also listens on a Unix socket (:class:`HostProxy`) that is
bound into every sandbox; inside, a small relay (:data:`RELAY_CODE`, started before the command
and dying with the sandbox) listens on ``127.0.0.1:3128`` and carries each connection to that
socket, and ``HTTP_PROXY``/``HTTPS_PROXY`` name the relay. This is how Claude Code's sandbox
runtime filters by host on Linux, since bubblewrap cannot.

The proxy reads one request head: ``CONNECT host:port`` (HTTPS, or any TCP a client tunnels) or
an absolute-form ``http://`` request. It connects only to a listed host and port
(:class:`HostRules`) and answers anything else with a 403 naming the setting. Code that ignores
the proxy variables reaches nothing at all. Names are matched as the client sent them, before
any lookup, and connected to as the worker resolves them: list only hosts whose names you trust.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

__all__ = [
    "PROXY_SOCKET",
    "RELAY_CODE",
    "RELAY_PORT",
    "HostProxy",
    "HostRules",
    "proxy_environment",
]

from agent_core.config.hosts import parse_host_entry, split_host_port

log = logging.getLogger("soong.sandbox")

PROXY_SOCKET: Final = "/run/soong-proxy.sock"  # where the proxy's socket appears in a sandbox
RELAY_PORT: Final = 3128
_HEAD_LIMIT: Final = 16 * 1024
_HEAD_TIMEOUT_S: Final = 10.0
_CONNECT_TIMEOUT_S: Final = 10.0
_MAX_CONNECTIONS: Final = 256
_CHUNK: Final = 64 * 1024
_HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "upgrade"}
)

# Runs inside the sandbox as ``python3 -I -S -c RELAY_CODE <command…>``: binds the relay's port
# first (so the command never races it), forks the relay, then becomes the command itself (its
# exit code is the call's). The relay dies with the sandbox's PID namespace.
RELAY_CODE: Final = f"""
import os, socket, sys, threading
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", {RELAY_PORT}))
listener.listen(64)
if os.fork() == 0:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    def pump(src, dst):
        try:
            while True:
                data = src.recv({_CHUNK})
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
    def serve(client):
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect({PROXY_SOCKET!r})
        except OSError:
            client.close()
            return
        back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        back.start()
        pump(client, upstream)
        back.join()
        client.close()
        upstream.close()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
listener.close()
os.execvp(sys.argv[1], sys.argv[1:])
"""


def proxy_environment() -> dict[str, str]:
    """The variables that send a sandbox's HTTP clients through the relay."""
    url = f"http://127.0.0.1:{RELAY_PORT}"
    return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url}


@dataclass(frozen=True, slots=True)
class HostRules:
    """Which host and port a sandbox may reach (built from ``sandbox.allowed_hosts``)."""

    entries: tuple[tuple[str, frozenset[int]], ...]

    @classmethod
    def of(cls, entries: Sequence[str]) -> HostRules:
        return cls(tuple(parse_host_entry(e) for e in entries))

    def allows(self, host: str, port: int) -> bool:
        host = host.lower().rstrip(".")
        for pattern, ports in self.entries:
            if port not in ports:
                continue
            if pattern.startswith("*."):
                if host.endswith(pattern[1:]):
                    return True
            elif host == pattern:
                return True
        return False


def _answer(writer: asyncio.StreamWriter, status: str, text: str) -> None:
    body = text.encode() + b"\n"
    writer.write(
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await src.read(_CHUNK):
            dst.write(data)
            await dst.drain()
    with contextlib.suppress(OSError, RuntimeError):
        if dst.can_write_eof():
            dst.write_eof()


class HostProxy:
    """The worker's side: a Unix-socket proxy that connects only to allowed hosts."""

    def __init__(self, rules: HostRules) -> None:
        self.rules = rules
        self.socket_path: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self._dir: str | None = None
        self._slots = asyncio.Semaphore(_MAX_CONNECTIONS)

    async def start(self) -> str:
        """Listen (once); the socket's path on the host."""
        if self.socket_path is not None:
            return self.socket_path
        # A short path of its own (a Unix socket path holds 107 bytes), passable by the sandbox's
        # user (uid 65534), which must be able to connect to the socket.
        self._dir = tempfile.mkdtemp(prefix="soong-proxy-")
        os.chmod(self._dir, 0o711)
        path = os.path.join(self._dir, "proxy.sock")
        self._server = await asyncio.start_unix_server(self._serve, path, limit=_HEAD_LIMIT)
        os.chmod(path, 0o666)
        self.socket_path = path
        return path

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._server, self._dir, self.socket_path = None, None, None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with self._slots:
                await self._handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(_HEAD_TIMEOUT_S):
            head = await reader.readuntil(b"\r\n\r\n")
        line, *headers = head[:-4].decode("latin-1").split("\r\n")
        parts = line.split(" ")
        if len(parts) != 3:
            _answer(writer, "400 Bad Request", "not an HTTP request")
            return
        method, target, version = parts
        try:
            if method == "CONNECT":
                host, port = split_host_port(target)
                if port is None:
                    raise ValueError("CONNECT needs host:port")
                forward = b""
            else:
                url = urlsplit(target)
                if url.scheme != "http" or not url.hostname:
                    raise ValueError("only absolute http:// requests or CONNECT")
                host, port = url.hostname, url.port or 80
                path = (url.path or "/") + (f"?{url.query}" if url.query else "")
                kept = [h for h in headers if h.split(":", 1)[0].strip().lower() not in _HOP_BY_HOP]
                forward = "\r\n".join(
                    [f"{method} {path} {version}", *kept, "Connection: close", "", ""]
                ).encode("latin-1")
        except ValueError as exc:
            _answer(writer, "400 Bad Request", str(exc))
            return
        if not self.rules.allows(host, port):
            log.info("sandbox proxy refused %s:%s (not in sandbox.allowed_hosts)", host, port)
            _answer(writer, "403 Forbidden", f"{host}:{port} is not in sandbox.allowed_hosts")
            return
        try:
            async with asyncio.timeout(_CONNECT_TIMEOUT_S):
                up_reader, up_writer = await asyncio.open_connection(host, port, limit=_CHUNK)
        except (OSError, TimeoutError) as exc:
            _answer(writer, "502 Bad Gateway", f"{host}:{port} unreachable: {type(exc).__name__}")
            return
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(forward)
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        finally:
            up_writer.close()
            with contextlib.suppress(OSError):
                await up_writer.wait_closed()
