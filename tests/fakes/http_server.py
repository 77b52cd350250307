"""A tiny HTTP/1.1 server on raw asyncio streams, the base of the fake provider servers.

Raw streams instead of an ASGI stack because the fakes need exact control over bytes: where a
chunk boundary falls (inside a UTF-8 character), when a connection drops mid-body, and noticing
when the *client* closed the connection (the cancellation tests assert it server-side).

Responses to streamed requests use ``Transfer-Encoding: chunked``; every rendered frame is one
HTTP chunk written and drained on its own. Connections are kept alive between requests, as the
SDKs' connection pools expect. A server runs either on the caller's event loop
(``async with server:``) or on its own loop in a daemon thread (:meth:`start_in_thread`, used by
fixtures on another loop and by the demo mode); the wait helpers poll, so they work from both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from tests.fakes.script import (
    ContextOverflow,
    Cut,
    Delay,
    Drop,
    ScriptedResponse,
    ScriptedStatus,
    ScriptedTurn,
    TurnFactory,
)

__all__ = ["Action", "FakeHTTPServer", "RecordedRequest"]

Action = bytes | Delay | Drop | Cut
"""What a renderer produces: a frame to write as one chunk, a pause, a dropped connection, or a
cut (the next frame written only in part, then the end of the response)."""

_POLL_S = 0.002


@dataclass
class RecordedRequest:
    """One request as the server received it, and how its response ended."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int | None = None
    completed: bool = False
    dropped: bool = False
    client_closed: bool = False
    # How many frames were written in more than one piece (split_multibyte / write_size).
    split_frames: int = 0
    client: str = ""  # the caller's address (which host a request came from)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def json(self) -> Any:
        """The body parsed as JSON (``None`` when empty)."""
        return json.loads(self.body) if self.body else None


class FakeHTTPServer:
    """Base of the fake provider servers: scripting, recording, connection handling.

    Subclasses set ``stream_paths`` / ``content_type`` and implement :meth:`render` (and
    optionally :meth:`handle_other` for non-streaming endpoints).
    """

    stream_paths: tuple[str, ...] = ()
    content_type = "text/event-stream; charset=utf-8"

    def __init__(
        self,
        script: Iterable[ScriptedResponse] = (),
        *,
        default: TurnFactory | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.script: deque[ScriptedResponse] = deque(script)
        self.default = default
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self.unscripted = 0
        self.connections = 0  # accepted so far: a client that reuses its connection adds none
        self._server: asyncio.Server | None = None
        self._conn_writers: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    # -- scripting ---------------------------------------------------------------------------

    def push(self, *responses: ScriptedResponse | Sequence[ScriptedResponse]) -> None:
        """Append answers (or lists of answers) to the script."""
        for r in responses:
            if isinstance(r, ScriptedTurn | ScriptedStatus):
                self.script.append(r)
            else:
                self.script.extend(r)

    def assert_script_consumed(self) -> None:
        """Fail when scripted answers were left unused or a request found the script empty."""
        assert not self.script, f"{len(self.script)} scripted answers left unused"
        assert self.unscripted == 0, f"{self.unscripted} requests found the script empty"

    def render(self, turn: ScriptedTurn, request: Any) -> list[Action]:
        """Render a turn into wire frames; ``request`` is the parsed request body."""
        raise NotImplementedError

    def context_overflow(
        self, overflow: ContextOverflow, request: Any
    ) -> ScriptedStatus | ScriptedTurn:
        """How this provider answers a prompt longer than its context window."""
        raise NotImplementedError

    def error_body(self, status: ScriptedStatus) -> bytes:
        """The JSON body of an HTTP error answer."""
        body = status.body
        if body is None:
            body = {"error": {"message": HTTPStatus(status.status).phrase}}
        return json.dumps(body).encode()

    async def handle_other(self, req: RecordedRequest) -> tuple[int, Any] | None:
        """Answer a non-streaming endpoint as (status, JSON body), or ``None`` for 404."""
        return None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` once started."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Listen on ``host`` and a free port (``port=0``)."""
        self._server = await asyncio.start_server(self._on_connection, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        """Stop listening and end every open connection."""
        if self._server is not None:
            self._server.close()
        # Abort the sockets rather than cancel the handlers: on Python 3.11 asyncio's stream
        # callback logs a spurious error for a cancelled handler task. An aborted socket makes
        # each handler see EOF (or "client gone") and return on its own.
        for writer in list(self._conn_writers.values()):
            writer.transport.abort()
        if self._conn_writers:
            await asyncio.wait(list(self._conn_writers), timeout=5)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> FakeHTTPServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def start_in_thread(self) -> FakeHTTPServer:
        """Run the server on its own event loop in a daemon thread; returns once listening."""
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._thread_loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self.start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.aclose())
            loop.close()

        self._thread = threading.Thread(target=run, name=f"{type(self).__name__}", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop_thread(self) -> None:
        """Stop a server started with :meth:`start_in_thread`."""
        if self._thread_loop is not None and self._thread is not None:
            self._thread_loop.call_soon_threadsafe(self._thread_loop.stop)
            self._thread.join(10)
            self._thread = None
            self._thread_loop = None

    async def wait_for_requests(self, n: int, timeout: float = 5.0) -> None:
        """Wait until ``n`` requests were received (polls; works across threads)."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(self.requests)} of {n} requests arrived")
            await asyncio.sleep(_POLL_S)

    async def wait_done(self, index: int, timeout: float = 5.0) -> RecordedRequest:
        """Wait until the response to request ``index`` ended (completed, dropped, client left)."""
        await self.wait_for_requests(index + 1, timeout)
        req = self.requests[index]
        deadline = time.monotonic() + timeout
        while not req.done.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError(f"response {index} still open after {timeout}s")
            await asyncio.sleep(_POLL_S)
        return req

    # -- connection handling -----------------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conn_writers[task] = writer
        self.connections += 1
        try:
            peer = writer.get_extra_info("peername")
            while (req := await _read_request(reader)) is not None:
                req.client = str(peer[0]) if peer else ""
                self.requests.append(req)
                try:
                    keep_alive = await self._respond(req, reader, writer)
                finally:
                    req.done.set()
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing left to answer
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            # Only now: aclose() waits for every task still listed, up to its very end.
            self._conn_writers.pop(task, None)

    async def _respond(
        self, req: RecordedRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        path = req.path.split("?", 1)[0]
        if req.method == "POST" and path in self.stream_paths:
            answer = self._next_answer(req)
            if isinstance(answer, ContextOverflow):
                answer = self.context_overflow(answer, req.json)
            if isinstance(answer, ScriptedStatus):
                await _write_full(
                    writer, req, answer.status, self.error_body(answer), answer.headers
                )
                return True
            return await self._stream(req, answer, reader, writer)
        other = await self.handle_other(req)
        if other is None:
            other = (404, {"error": {"message": f"no route {req.method} {path} (fake)"}})
        await _write_full(writer, req, other[0], json.dumps(other[1]).encode(), {})
        return True

    def _next_answer(self, req: RecordedRequest) -> ScriptedResponse:
        if self.script:
            return self.script.popleft()
        if self.default is not None:
            return self.default(req.json)
        self.unscripted += 1
        return ScriptedStatus(status=500, body={"error": {"message": "fake script exhausted"}})

    async def _stream(
        self,
        req: RecordedRequest,
        turn: ScriptedTurn,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        req.status = 200
        # gzip (wbits 31), each write flushed whole: the client can decode every frame on arrival.
        gzip = zlib.compressobj(wbits=31) if turn.gzip else None
        head = (
            "HTTP/1.1 200 OK\r\n"
            f"content-type: {self.content_type}\r\n"
            + ("content-encoding: gzip\r\n" if gzip else "")
            + "transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n"
        )
        writer.write(head.encode())
        await writer.drain()
        cut: Cut | None = None
        for action in [] if turn.silent else self.render(turn, req.json):
            if _client_gone(reader, writer):
                req.client_closed = True
                return False
            if isinstance(action, Drop):
                req.dropped = True
                writer.transport.abort()
                return False
            if isinstance(action, Delay):
                if await _sleep_unless_gone(action.seconds, reader, writer):
                    req.client_closed = True
                    return False
                continue
            if isinstance(action, Cut):
                cut = action
                continue
            if cut is not None:
                if part := action[: cut.keep]:
                    writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                    await writer.drain()
                break
            pieces = _pieces(action, turn)
            req.split_frames += len(pieces) > 1
            for i, piece in enumerate(pieces):
                if i and await _sleep_unless_gone(turn.split_pause, reader, writer):
                    req.client_closed = True
                    return False
                if gzip is not None:
                    piece = gzip.compress(piece) + gzip.flush(zlib.Z_SYNC_FLUSH)
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
        if cut is not None and cut.drop:
            req.dropped = True
            writer.transport.abort()
            return False
        if gzip is not None:
            end = gzip.flush()
            writer.write(b"%x\r\n%s\r\n" % (len(end), end))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        req.completed = True
        return True


def _pieces(frame: bytes, turn: ScriptedTurn) -> list[bytes]:
    """Split a frame into the writes the turn asks for (inside a UTF-8 character, or sized)."""
    if turn.write_size:
        n = turn.write_size
        return [frame[i : i + n] for i in range(0, len(frame), n)]
    if turn.split_multibyte:
        for i, b in enumerate(frame):
            if b >= 0xC0:  # a UTF-8 lead byte: cut right after it, mid-character
                return [frame[: i + 1], frame[i + 1 :]]
    return [frame]


def _client_gone(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    # The client sends nothing while a response streams, so EOF (or a reset) means it hung up.
    return reader.at_eof() or reader.exception() is not None or writer.transport.is_closing()


async def _sleep_unless_gone(
    seconds: float, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> bool:
    """Sleep ``seconds``; return True early if the client closed the connection meanwhile."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if _client_gone(reader, writer):
            return True
        await asyncio.sleep(min(_POLL_S * 5, left))
    return _client_gone(reader, writer)


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return RecordedRequest(method=method, path=target, headers=headers, body=body)


async def _write_full(
    writer: asyncio.StreamWriter,
    req: RecordedRequest,
    status: int,
    body: bytes,
    headers: dict[str, str],
) -> None:
    req.status = status
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()
    req.completed = True
