"""A run asks a person (tool policy ``ask``): the request, the run ``pending``, the decision.

The request is stored where the gateway finds it (``GET …/permissions`` lists a session's waiting
requests, ``POST …/permissions/{id}`` decides one); the run is ``pending`` while any of its
requests waits (its status on the run row and on its stream). The wait blocks on a list the
gateway pushes to after deciding, and it has a deadline (``run_worker.permission_timeout_s``):
a request nobody decides in time is denied — the decision is stored like a person's, so a late
person gets 409 — and the tool call's result tells the model so. See ``docs/architecture.md``,
"Run lifecycle and endings".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from agent_core.bus import BusNames
from agent_core.bus.contracts.storage import UpdateRun
from agent_core.bus.names import BusTtl
from agent_core.ids import new_id
from agent_core.runqueue import RunEventWriter
from agent_core.storage_client import StorageClient, raise_for_receipt
from agent_core.types.enums import EventLevel, EventType, PermissionBehavior, RunStatus
from agent_core.types.protocol import PermissionDecision, PermissionRequest
from agent_core.types.runtime import RunPermissionRequested, RunStatusChanged
from services.run_worker.adapters import BusRunStore

__all__ = ["RedisPermissionBroker"]

_WAKE_S = 5.0  # a blocked wait looks at the decision again at least this often


class RedisPermissionBroker:
    """``ask``: announce the request, mark the run ``pending``, wait for the decision (or the
    deadline), mark it ``running`` again."""

    def __init__(
        self,
        redis: Redis,
        names: BusNames,
        storage: StorageClient,
        events: RunEventWriter,
        store: BusRunStore,
        *,
        timeout_s: float,
    ) -> None:
        self._redis = redis
        self._names = names
        self._storage = storage
        self._events = events
        self._store = store
        self._timeout_s = timeout_s
        self._waiting = 0  # requests of this run that wait now (parallel tool calls may ask)

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        handle = self._store.handle
        deadline = time.monotonic() + self._timeout_s
        expires = datetime.now(UTC) + timedelta(seconds=self._timeout_s)
        request = request.model_copy(update={"expires_at": expires})
        raw = request.model_dump_json()
        pending = self._names.session_permissions(handle.session_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.set(
                self._names.permission_request(handle.session_id, request.request_id),
                raw,
                ex=BusTtl.PERMISSION_S,
            )
            pipe.hset(pending, request.request_id, raw)
            pipe.expire(pending, BusTtl.PERMISSION_S)
            await pipe.execute()
        self._events.emit(
            RunPermissionRequested(
                run_id=handle.run_id,
                session_id=handle.session_id,
                agent_id=handle.agent_id,
                request=request,
            )
        )
        self._waiting += 1
        try:
            await asyncio.gather(
                self._store.append_event(
                    EventType.PERMISSION_REQUESTED,
                    tool_call_id=request.tool_call.id,
                    payload={"request_id": request.request_id, "tool": request.tool_call.name},
                ),
                self._status(RunStatus.PENDING) if self._waiting == 1 else _nothing(),
            )
            decision, timed_out = await self._wait(request, deadline)
        finally:
            self._waiting -= 1
            with contextlib.suppress(Exception):
                await self._redis.hdel(pending, request.request_id)
        await asyncio.gather(
            self._store.append_event(
                EventType.PERMISSION_DECIDED,
                level=EventLevel.WARNING if timed_out else EventLevel.INFO,
                tool_call_id=request.tool_call.id,
                payload={
                    "request_id": request.request_id,
                    "behavior": decision.behavior.value,
                    "allowed": decision.behavior is PermissionBehavior.ALLOW,
                    "timed_out": timed_out,
                    # approved with edited arguments: the call runs with these
                    **({"arguments": decision.arguments} if decision.arguments is not None else {}),
                },
            ),
            self._status(RunStatus.RUNNING) if self._waiting == 0 else _nothing(),
        )
        return decision

    async def _wait(
        self, request: PermissionRequest, deadline: float
    ) -> tuple[PermissionDecision, bool]:
        """The decision, and whether it is the deadline's; blocks on the wake-up list."""
        key = self._names.permission_decision(request.session_id, request.request_id)
        wake = self._names.permission_wake(request.session_id, request.request_id)
        while True:
            raw = await self._redis.get(key)
            if raw is not None:
                return PermissionDecision.model_validate_json(raw), False
            left = deadline - time.monotonic()
            if left <= 0:
                return await self._deny_late(request, key)
            await self._redis.blpop([wake], timeout=min(left, _WAKE_S))

    async def _deny_late(
        self, request: PermissionRequest, key: str
    ) -> tuple[PermissionDecision, bool]:
        """Nobody decided in time: store a denial (unless a decision just arrived) and use it."""
        denial = PermissionDecision(
            request_id=request.request_id,
            behavior=PermissionBehavior.DENY,
            reason=f"nobody decided within {self._timeout_s:g} s, so the call was not run",
            decided_by="timeout",
        )
        if await self._redis.set(key, denial.model_dump_json(), ex=BusTtl.PERMISSION_S, nx=True):
            return denial, True
        raw = await self._redis.get(key)  # decided in the last moment: that decision stands
        assert raw is not None
        return PermissionDecision.model_validate_json(raw), False

    async def _status(self, status: RunStatus) -> None:
        """The run waits (``pending``) or goes on (``running``): on its row and its stream."""
        handle = self._store.handle
        raise_for_receipt(
            await self._storage.send(
                UpdateRun(
                    command_id=new_id("cmd"),
                    session_id=handle.session_id,
                    run_id=handle.run_id,
                    fence=self._store.fence,
                    status=status,
                )
            )
        )
        previous = RunStatus.RUNNING if status is RunStatus.PENDING else RunStatus.PENDING
        self._events.emit(
            RunStatusChanged(
                run_id=handle.run_id,
                session_id=handle.session_id,
                agent_id=handle.agent_id,
                status=status,
                previous=previous,
                attempt=handle.attempt,
            )
        )


async def _nothing() -> None:
    return None
