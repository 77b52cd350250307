"""One configured MCP server as a worker sees it: started on first use, restarted after a crash
with back-off, its tool list cached and refreshed when the server says it changed.

Every failure a tool call can meet is a :class:`ToolError` with an ``mcp_*`` code, which the tool
executor turns into an ``is_error`` result for the model; nothing here can hold a run longer than
the server's ``connect_timeout_s`` plus its ``call_timeout_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import mcp_types as types
from mcp.shared.exceptions import MCPError

from agent_core.config.mcp import McpServerSettings
from agent_core.errors import ToolError, redact
from agent_core.mcp.connection import Connection
from agent_core.mcp.names import admitted
from agent_core.observability.metrics import MCP_SERVER_CRASHES, MCP_SERVER_STARTS

__all__ = ["McpServerClient", "backoff_s"]

log = logging.getLogger("soong.mcp")

_MAX_PAGES = 20  # a server whose tools/list never ends cannot hold a start forever
_MAX_BACKOFF_S = 30.0


def backoff_s(failures: int) -> float:
    """How long after its ``failures``-th failure in a row a server is started again: at once
    after one (a crash mid-call is retried by the next call), then 1, 2, 4 … 30 s."""
    if failures <= 1:
        return 0.0
    return float(min(2 ** (failures - 2), _MAX_BACKOFF_S))


class McpServerClient:
    """The worker's client of one MCP server (shared by all its runs; calls run concurrently)."""

    def __init__(
        self,
        name: str,
        settings: McpServerSettings,
        *,
        environ: Mapping[str, str] | None = None,
        errlog: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.settings = settings
        self.starts = 0  # how many times the server was started (restarts show here)
        self.version = 0  # how many times its tools were listed
        self._environ = environ
        self._errlog = errlog
        self._clock = clock
        self._conn: Connection | None = None
        self._lock = asyncio.Lock()
        self._tools: list[types.Tool] | None = None
        self._listed = asyncio.Event()  # set after each listing (tests wait on refreshes)
        self._failures = 0
        self._retry_at = 0.0
        self._last_error = ""
        self._closed = False
        self._refresh: asyncio.Task[None] | None = None
        self._counted: Connection | None = None
        self._stale = False
        self._reaping: set[asyncio.Task[None]] = set()
        self._starting: asyncio.Task[None] | None = None

    @property
    def cached_tools(self) -> list[types.Tool] | None:
        """The last tool list (allow/deny applied), ``None`` before the first listing."""
        return self._tools

    async def tools(self) -> list[types.Tool]:
        """The server's tools (allow/deny applied), starting the server if it is not running.
        A server that cannot be reached keeps offering its last list (its calls then fail with
        a clear error); one never listed raises :class:`ToolError` ``mcp_server_unavailable``.

        Only the first listing waits for the server: later, a server that is down is started
        again aside, and the run starts at once with the last list."""
        conn = self._conn
        if self._tools is not None and (conn is None or conn.ended.is_set()):
            if not self._closed and (self._starting is None or self._starting.done()):
                self._starting = asyncio.create_task(self._start_aside())
            return self._tools
        try:
            await self._connection()
        except ToolError:
            if self._tools is None:
                raise
        assert self._tools is not None
        return self._tools

    async def _start_aside(self) -> None:
        with contextlib.suppress(ToolError):  # counted and logged by the start itself
            await self._connection()

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call ``tool`` (its name on the server) within ``call_timeout_s``."""
        if not admitted(self.settings, tool):
            raise ToolError("mcp_tool_denied", f"{tool!r} of MCP server {self.name!r} is denied")
        conn = await self._connection()
        session = conn.session
        assert session is not None
        timeout = self.settings.call_timeout_s
        try:
            async with asyncio.timeout(timeout + 1.0):  # the SDK's own timeout comes first
                result = await session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            raise self._timeout(tool, timeout) from None
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise self._timeout(tool, timeout) from None
            if exc.code == types.CONNECTION_CLOSED or conn.ended.is_set():
                self._crashed(conn, f"it stopped during a call ({exc.message})")
                raise ToolError(
                    "mcp_server_crashed",
                    f"MCP server {self.name!r} stopped while running {tool!r}: the call's effect "
                    "is unknown. "
                    + (
                        "The server is started again for the next call."
                        if self._is_stdio
                        else "The next call connects to it again."
                    ),
                    retryable=True,
                ) from None
            raise ToolError(
                "mcp_error", f"MCP server {self.name!r} refused the call: {redact(exc.message)}"
            ) from None
        except (ToolError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a transport failure (HTTP) surfaces as its own exception
            # The session cannot be trusted after it: the next call connects afresh.
            self._crashed(conn, type(exc).__name__)
            raise ToolError(
                "mcp_server_unavailable",
                f"MCP server {self.name!r} could not run {tool!r}: {type(exc).__name__}: "
                f"{redact(str(exc))[:300]}",
                retryable=True,
            ) from None
        if not isinstance(result, types.CallToolResult):  # only asked-for extensions return others
            raise ToolError("mcp_error", f"MCP server {self.name!r} sent an unexpected result")
        self._failures = 0
        return result

    async def wait_listed(self) -> None:
        """Wait for the next listing of the server's tools (a refresh after a change)."""
        self._listed.clear()
        await self._listed.wait()

    async def close(self) -> None:
        """Stop the server for good (the worker is stopping); never raises."""
        self._closed = True
        aside = [t for t in (self._refresh, self._starting) if t is not None and not t.done()]
        for task in aside:
            task.cancel()
        if aside:
            await asyncio.wait(aside)
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
        if self._reaping:
            await asyncio.wait(list(self._reaping))

    def _timeout(self, tool: str, timeout: float) -> ToolError:
        return ToolError(
            "mcp_timeout",
            f"MCP server {self.name!r} did not answer {tool!r} within {timeout:g} s; the call was "
            "cancelled",
            retryable=True,
        )

    def _crashed(self, conn: Connection, why: str) -> None:
        """``conn`` is gone: it ends (its task leaves the transport) and the next use starts the
        server again, after the back-off."""
        conn.ended.set()
        if conn is not self._counted:  # a crash counts once, whoever notices it first
            self._counted = conn
            MCP_SERVER_CRASHES.labels(self.name).inc()
            self._failed(why)

    def _failed(self, why: str) -> None:
        self._failures += 1
        self._last_error = why
        self._retry_at = self._clock() + backoff_s(self._failures)
        log.warning(
            "mcp server %s failed (%s); failure %d in a row", self.name, why, self._failures
        )

    async def _connection(self) -> Connection:
        conn = self._conn
        if conn is not None and not conn.ended.is_set():
            return conn
        async with self._lock:
            conn = self._conn
            if conn is not None and not conn.ended.is_set():
                return conn
            if self._closed:
                raise ToolError("mcp_server_unavailable", f"MCP server {self.name!r} is stopped")
            if conn is not None:  # it died since: count the crash, reap it aside
                self._conn = None
                self._crashed(conn, "its process ended" if self._is_stdio else "it went away")
                reap = asyncio.create_task(conn.close())
                self._reaping.add(reap)
                reap.add_done_callback(self._reaping.discard)
            wait = self._retry_at - self._clock()
            if wait > 0:
                raise ToolError(
                    "mcp_server_unavailable",
                    f"MCP server {self.name!r} is not available ({self._last_error}); it is "
                    f"started again in {math.ceil(wait)} s",
                    retryable=True,
                    details={"retry_after_s": round(wait, 1)},
                )
            return await self._start()

    @property
    def _is_stdio(self) -> bool:
        return self.settings.transport == "stdio"

    async def _start(self) -> Connection:
        conn = Connection(
            self.name,
            self.settings,
            on_notice=self._notice,
            environ=self._environ,
            errlog=self._errlog,
        )
        self.starts += 1
        try:
            session = await conn.open()
            async with asyncio.timeout(self.settings.connect_timeout_s):
                await self._list(session)
        except (asyncio.CancelledError, KeyboardInterrupt):
            await conn.close()
            raise
        except BaseException as exc:
            await conn.close()
            MCP_SERVER_STARTS.labels(self.name, "failed").inc()
            why = "it did not start in time" if isinstance(exc, TimeoutError) else _why(exc)
            self._failed(why)
            raise ToolError(
                "mcp_server_unavailable",
                f"MCP server {self.name!r} could not be started: {why}",
                retryable=True,
            ) from None
        self._conn = conn
        self._last_error = ""
        MCP_SERVER_STARTS.labels(self.name, "ok").inc()
        log.info("mcp server %s started (%d tools)", self.name, len(self._tools or ()))
        return conn

    async def _list(self, session: Any) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        unique = {t.name: t for t in reversed(tools)}  # a name listed twice: its first entry
        self._tools = [t for t in tools if unique[t.name] is t and admitted(self.settings, t.name)]
        self.version += 1
        self._listed.set()

    async def _notice(self, message: types.ServerNotification) -> None:
        if not isinstance(message, types.ToolListChangedNotification):
            return
        self._stale = True  # a refresh under way lists again: this change may have missed it
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.create_task(self._relist())

    async def _relist(self) -> None:
        conn = self._conn
        try:
            # The notification can arrive before the start that caused it has stored the
            # connection (a server that changes its tools at once): wait for it briefly.
            for _ in range(100):
                if conn is not None and conn.session is not None:
                    break
                await asyncio.sleep(0.01)
                conn = self._conn
            while conn is not None and conn.session is not None and self._stale:
                self._stale = False
                async with asyncio.timeout(self.settings.connect_timeout_s):
                    await self._list(conn.session)
                log.info("mcp server %s: tool list refreshed", self.name)
        except Exception as exc:
            log.warning("mcp server %s: refreshing its tools failed: %s", self.name, _why(exc))


def _why(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return redact(exc.message)[:300]
    if isinstance(exc, BaseExceptionGroup):
        return _why(exc.exceptions[0])
    text = redact(str(exc))[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
