"""``AsyncClient``: the SDK's entry point — sessions, memory, health — over one connection pool."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Literal, Self

import httpx

from agent_core.memory.views import MemoryFile, MemoryFiles, MemoryHistoryView
from agent_core.types.api import AuditList, Health, Readiness, SessionList, UsageReport
from agent_core.types.enums import SessionStatus
from agent_core.types.runtime import AgentConfigOverrides, SessionState
from soong_agent import _operations as ops
from soong_agent._assistants import AsyncAssistants
from soong_agent._errors import error_from_response
from soong_agent._http import HttpCore, parse
from soong_agent._session import AsyncSession, _config_json

__all__ = ["DEFAULT_URL", "AsyncClient", "AsyncMemory"]

DEFAULT_URL = "http://127.0.0.1:8720"


class AsyncMemory:
    """The account's memory files (``user.md``, ``skills/<skill>.md``) with their ETags.

    Writes are conditional: pass the ``etag`` of the :class:`MemoryFile` you read as
    ``if_match`` (``"*"`` for a file that does not exist yet); a stale one raises
    :class:`~soong_agent.PreconditionFailedError` and nothing is written.
    """

    def __init__(self, http: HttpCore) -> None:
        self._http = http

    async def read(self, skill: str | None = None) -> MemoryFile:
        """``user.md``, or ``skills/<skill>.md`` when ``skill`` is given."""
        if skill is None:
            return await self._http.model(ops.READ_USER_MEMORY, MemoryFile)
        return await self._http.model(ops.READ_SKILL_MEMORY, MemoryFile, {"skill": skill})

    async def write(self, content: str, *, if_match: str, skill: str | None = None) -> MemoryFile:
        """Replace the file if it still has the ETag ``if_match``; the new file and ETag."""
        headers = {"If-Match": _quoted(if_match)}
        body = {"content": content}
        if skill is None:
            return await self._http.model(
                ops.WRITE_USER_MEMORY, MemoryFile, json=body, headers=headers
            )
        return await self._http.model(
            ops.WRITE_SKILL_MEMORY, MemoryFile, {"skill": skill}, json=body, headers=headers
        )

    async def list(self) -> MemoryFiles:
        """The account's memory files (``user`` first, then the skills) with sizes and ETags."""
        return await self._http.model(ops.LIST_MEMORY, MemoryFiles)

    async def history(self, skill: str | None = None) -> MemoryHistoryView:
        """The versions of ``user.md`` (or ``skills/<skill>.md``), newest first."""
        if skill is None:
            return await self._http.model(ops.USER_MEMORY_HISTORY, MemoryHistoryView)
        return await self._http.model(ops.SKILL_MEMORY_HISTORY, MemoryHistoryView, {"skill": skill})

    async def restore(self, version: str, *, if_match: str, skill: str | None = None) -> MemoryFile:
        """Write an earlier ``version`` (a past ETag from :meth:`history`) back, if the file
        still has the ETag ``if_match``; the restored file and its new ETag."""
        headers = {"If-Match": _quoted(if_match)}
        body = {"version": version}
        if skill is None:
            return await self._http.model(
                ops.RESTORE_USER_MEMORY, MemoryFile, json=body, headers=headers
            )
        return await self._http.model(
            ops.RESTORE_SKILL_MEMORY, MemoryFile, {"skill": skill}, json=body, headers=headers
        )


def _quoted(etag: str) -> str:
    """An If-Match value: ``*`` as is, an ETag in quotes."""
    return etag if etag == "*" else f'"{etag.strip(chr(34))}"'


class AsyncClient:
    """A client of one gateway with one API key; use it as ``async with AsyncClient() as c``.

    ``base_url`` and ``api_key`` default to ``$SOONG_GATEWAY_URL`` and ``$SOONG_API_KEY``.
    ``max_retries`` bounds the retries of one request (see :mod:`soong_agent._http` for which
    are retried); ``reconnect_timeout_s`` how long an event stream keeps trying to resume
    without progress. ``transport`` replaces httpx's (tests, proxies, ASGI apps).
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout_s: float = 30.0,
        max_retries: int = 4,
        max_retry_wait_s: float = 30.0,
        reconnect_timeout_s: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        url = base_url or os.environ.get("SOONG_GATEWAY_URL") or DEFAULT_URL
        key = api_key or os.environ.get("SOONG_API_KEY")
        if not key:
            raise ValueError("give an API key (api_key=… or $SOONG_API_KEY)")
        self._http = HttpCore(
            url,
            key,
            timeout_s=timeout_s,
            max_retries=max_retries,
            max_retry_wait_s=max_retry_wait_s,
            transport=transport,
        )
        self._reconnect_s = reconnect_timeout_s
        self.memory = AsyncMemory(self._http)
        self.assistants = AsyncAssistants(self._http)

    @property
    def base_url(self) -> str:
        """The gateway's URL."""
        return self._http.base_url

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._http.aclose()

    # ---------------------------------------------------------------- sessions

    def session(self, session_id: str) -> AsyncSession:
        """A handle on an existing session (no request is made)."""
        return AsyncSession(self._http, session_id, reconnect_s=self._reconnect_s)

    async def create_session(
        self,
        *,
        cwd: str | None = None,
        metadata: dict[str, Any] | None = None,
        agent_config: AgentConfigOverrides | dict[str, Any] | None = None,
        mode: Literal["agent", "orchestrator"] = "agent",
        assistant: str | None = None,
        assistant_version: int | None = None,
    ) -> AsyncSession:
        """Create a session and return its handle (``session.id``); with ``assistant`` (a name
        or id) from that named agent, pinned to its latest version or ``assistant_version``."""
        body: dict[str, Any] = {"mode": mode}
        if assistant is not None:
            body["assistant"] = assistant
        if assistant_version is not None:
            body["assistant_version"] = assistant_version
        if cwd is not None:
            body["cwd"] = cwd
        if metadata is not None:
            body["metadata"] = metadata
        if agent_config is not None:
            body["agent_config"] = _config_json(agent_config)
        state = await self._http.model(ops.CREATE_SESSION, SessionState, json=body)
        return self.session(state.session_id)

    async def list_sessions(
        self,
        *,
        status: SessionStatus | str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> SessionList:
        """One page of the key's sessions, newest first (``next_cursor`` for the next page)."""
        query = {
            "status": None if status is None else str(status),
            "limit": limit,
            "cursor": cursor,
        }
        return await self._http.model(ops.LIST_SESSIONS, SessionList, query=query)

    async def search_sessions(
        self, q: str, *, status: SessionStatus | str | None = None, limit: int = 50
    ) -> SessionList:
        """The key's sessions whose title or message text holds every word of ``q`` (the last
        also as a prefix), by their newest matching text; ``matches`` says where each matched."""
        query = {"q": q, "status": None if status is None else str(status), "limit": limit}
        return await self._http.model(ops.LIST_SESSIONS, SessionList, query=query)

    async def audit(self, *, before_seq: int | None = None, limit: int = 50) -> AuditList:
        """The account's audit events (``session_deleted``), newest first."""
        query = {"before_seq": before_seq, "limit": limit}
        return await self._http.model(ops.LIST_AUDIT, AuditList, query=query)

    async def iter_sessions(
        self, *, status: SessionStatus | str | None = None, page_size: int = 50
    ) -> AsyncIterator[SessionState]:
        """Every session of the key, newest first, page by page."""
        cursor: str | None = None
        while True:
            page = await self.list_sessions(status=status, limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def usage(
        self, *, since: dt.date | None = None, until: dt.date | None = None
    ) -> UsageReport:
        """The account's token usage by day (UTC) and model from ``since`` to ``until`` (both
        included; open ends when left out), with the sum."""
        query = {
            name: day.isoformat()
            for name, day in (("since", since), ("until", until))
            if day is not None
        }
        return await self._http.model(ops.USAGE, UsageReport, query=query)

    # ---------------------------------------------------------------- health

    async def health(self) -> Health:
        """Liveness of the gateway process."""
        return await self._http.model(ops.HEALTHZ, Health)

    async def readiness(self) -> Readiness:
        """Whether the bus and every service answer (not ready is an answer, not an error)."""
        response = await self._http.send_once(ops.READYZ)
        if response.status_code not in (200, 503):  # 503 carries a Readiness body too
            raise error_from_response(response)
        return parse(Readiness, response.content)
