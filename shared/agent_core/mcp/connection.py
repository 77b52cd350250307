"""One live connection to an MCP server: its transport and SDK session, owned by one task.

The SDK's transports and ``ClientSession`` are anyio context managers that must be entered and
left by the same task, so a connection is a task that opens them, hands the session out, and
holds them until it is told to stop — or until the server's stream ends (its process died, its
HTTP endpoint went away), which the connection notices at once through a watch on the read
stream, not at the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self, TextIO

import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from agent_core.config.mcp import McpServerSettings

__all__ = ["Connection"]

log = logging.getLogger("soong.mcp")

_CLIENT_INFO = types.Implementation(name="soong-agent", version="0.1.0")
# Leaving a stdio transport closes the server's stdin and waits (the SDK: 2 s, then SIGTERM to its
# process group, 2 s, SIGKILL); past this the task is cancelled.
_CLOSE_WAIT_S = 8.0

OnNotice = Callable[[types.ServerNotification], Awaitable[None]]


class _WatchedStream:
    """The transport's read stream, setting ``ended`` when it ends (EOF or closed)."""

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self._inner = inner
        self._ended = ended

    def __getattr__(self, name: str) -> Any:  # ``last_context`` and whatever else is read
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except BaseException:
            self._ended.set()
            raise

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except BaseException:
            self._ended.set()
            raise

    async def aclose(self) -> None:
        self._ended.set()
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._ended.set()
        result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        return result


class Connection:
    """A started server: ``session`` once :meth:`open` returned, ``ended`` when it is gone."""

    def __init__(
        self,
        name: str,
        settings: McpServerSettings,
        *,
        on_notice: OnNotice,
        environ: Mapping[str, str] | None = None,
        errlog: TextIO | None = None,
    ) -> None:
        self.name = name
        self.settings = settings
        self.ended = asyncio.Event()
        self._on_notice = on_notice
        self._environ = os.environ if environ is None else environ
        self._errlog = errlog or sys.stderr
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self.session: ClientSession | None = None

    async def open(self) -> ClientSession:
        """Start the server and initialize the session within ``connect_timeout_s``; raises
        ``TimeoutError`` or whatever the transport raised (the connection is closed then)."""
        self._task = asyncio.create_task(self._run(), name=f"mcp-{self.name}")
        try:
            async with asyncio.timeout(self.settings.connect_timeout_s):
                self.session = await asyncio.shield(self._ready)
        except BaseException:
            await self.close()
            raise
        return self.session

    async def close(self) -> None:
        """Stop the server (stdio) or end the HTTP session; bounded, never raises."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if not self._ready.done():
            task.cancel()  # still starting: nothing to leave politely
        done, _ = await asyncio.wait([task], timeout=_CLOSE_WAIT_S)
        if not done:
            task.cancel()
            await asyncio.wait([task], timeout=_CLOSE_WAIT_S)

    async def _run(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(stack))
                watched = _WatchedStream(read, self.ended)
                session = await stack.enter_async_context(
                    ClientSession(
                        watched, write, message_handler=self._message, client_info=_CLIENT_INFO
                    )
                )
                await session.initialize()
                self._ready.set_result(session)
                stop = asyncio.create_task(self._stop.wait())
                gone = asyncio.create_task(self.ended.wait())
                try:
                    await asyncio.wait([stop, gone], return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stop.cancel()
                    gone.cancel()
        except BaseException as exc:
            if not self._ready.done():
                if isinstance(exc, asyncio.CancelledError):
                    self._ready.cancel()
                else:
                    self._ready.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
            log.debug("mcp server %s: connection ended: %s", self.name, type(exc).__name__)
        finally:
            self.ended.set()

    def _transport(self, stack: AsyncExitStack) -> contextlib.AbstractAsyncContextManager[Any]:
        s = self.settings
        if s.transport == "stdio":
            params = StdioServerParameters(
                command=s.command[0],
                args=list(s.command[1:]),
                env=dict(s.env),
                cwd=s.cwd,
            )
            return stdio_client(params, errlog=self._errlog)
        headers = dict(s.headers)
        for header, var in s.headers_from_env.items():
            value = self._environ.get(var)
            if value:
                headers[header] = value
        http = create_mcp_http_client(headers=headers)
        stack.push_async_callback(http.aclose)
        assert s.url is not None  # the settings' validator requires it for http
        return streamable_http_client(s.url, http_client=http)

    async def _message(self, message: Any) -> None:
        if isinstance(message, Exception):
            log.debug("mcp server %s: transport error: %s", self.name, type(message).__name__)
            return
        await self._on_notice(message)
