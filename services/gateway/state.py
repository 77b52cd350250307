"""What every route needs: the gateway's connections (one per process) and account-scoped lookups.

Every lookup passes the caller's account to the storage-writer, which answers another account's
id exactly like a missing one; both become the same 404 here. Ids that could not have been
generated answer 404 too, without a round trip.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, cast

from fastapi import Depends, Request

from agent_core.bus.contracts._replies import TypedQuery
from agent_core.bus.contracts.storage import GetRun, GetSession, GetSessionWithUsage, StorageQuery
from agent_core.config import agent_config
from agent_core.errors import ConfigError
from agent_core.files import FileStore, build_file_store
from agent_core.ids import is_valid_id
from agent_core.runqueue import SessionQueue
from agent_core.service import ServiceContext
from agent_core.storage_client import StorageClient
from agent_core.types.mappers import to_run_state, to_session_state
from agent_core.types.runtime import AgentConfigOverrides, RunState, SessionState
from services.gateway.auth import Authenticator, Caller
from services.gateway.errors import ApiError, not_found
from services.gateway.hub import EventHub
from services.gateway.limits import SseSlots

__all__ = [
    "CallerDep",
    "Gateway",
    "GatewayDep",
    "agent_overrides",
    "fetch",
    "fetch_optional",
    "fetch_page",
    "get_run",
    "get_session",
    "valid_session_id",
]

R = TypeVar("R")

_SESSION_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


@dataclass
class Gateway:
    """Connections and limits shared by the routes of one gateway process."""

    ctx: ServiceContext
    storage: StorageClient
    queue: SessionQueue
    events: EventHub
    auth: Authenticator
    slots: SseSlots
    # Session files (uploads, workspace areas, artifacts) by key; checked when the service starts.
    files: FileStore

    @classmethod
    def build(cls, ctx: ServiceContext) -> Gateway:
        """Everything from the service context; no I/O."""
        gw = ctx.settings.gateway
        return cls(
            ctx=ctx,
            storage=StorageClient(ctx.rpc, ctx.names, timeout_s=ctx.settings.bus.request_timeout_s),
            queue=SessionQueue(ctx.bus, ctx.names),
            events=EventHub(ctx.bus, ctx.names),
            auth=Authenticator(
                ctx.bus,
                ctx.names,
                rate_per_s=gw.rate_limit_per_s,
                burst=gw.rate_limit_burst,
                max_failures=gw.auth_failures_per_minute,
            ),
            slots=SseSlots(
                ctx.bus,
                ctx.names,
                limit=gw.max_sse_streams_per_key,
                # Per process life: a restarted gateway never takes over its predecessor's slots.
                gateway_id=f"{ctx.consumer_name}:{secrets.token_hex(4)}",
            ),
            files=build_file_store(ctx.settings),
        )


# Dependencies are ``async def``: FastAPI runs a plain ``def`` dependency in a worker thread, a
# thread hop on every request for what is an attribute read.
async def _gateway(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


async def _caller(request: Request) -> Caller:
    gw: Gateway = request.app.state.gateway
    return await gw.auth(request)


GatewayDep = Annotated[Gateway, Depends(_gateway)]
CallerDep = Annotated[Caller, Depends(_caller)]


def valid_session_id(session_id: str) -> bool:
    """Whether ``session_id`` has the shape of a generated id (cheap pre-check, no I/O)."""
    return (
        session_id.startswith("sess_")
        and len(session_id) <= 64
        and set(session_id) <= _SESSION_ID_CHARS
    )


async def fetch_page(gw: Gateway, query: TypedQuery[R]) -> tuple[R, str | None]:
    """The data, typed by the query, and next cursor of a query (data ``None``: nothing
    visible); a failed read raises."""
    reply = await gw.storage.query(cast("StorageQuery", query))
    return query.reply_of(reply), reply.next_cursor


async def fetch_optional(gw: Gateway, query: TypedQuery[R]) -> R:
    """The data of a query, typed by it (``None`` when nothing visible matched); a failed read
    raises."""
    data, _ = await fetch_page(gw, query)
    return data


async def fetch(gw: Gateway, query: TypedQuery[R | None], what: str) -> R:
    """Like :func:`fetch_optional`, but nothing visible is a 404 naming ``what``."""
    data = await fetch_optional(gw, query)
    if data is None:
        raise not_found(what)
    return data


async def get_session(
    gw: Gateway, caller: Caller, session_id: str, *, with_usage: bool = False
) -> SessionState:
    """The caller's session ``session_id`` or 404; ``with_usage``: with its usage totals, read
    in the same query (two queries side by side cost the bus and the writer twice the round
    trips)."""
    if not valid_session_id(session_id):
        raise not_found("session")
    if not with_usage:
        query = GetSession(session_id=session_id, account_id=caller.account_id)
        return to_session_state(await fetch(gw, query, "session"))
    both = GetSessionWithUsage(session_id=session_id, account_id=caller.account_id)
    found = await fetch(gw, both, "session")
    return to_session_state(found.session).model_copy(update={"usage": found.usage})


async def get_run(gw: Gateway, caller: Caller, session_id: str, run_id: str) -> RunState:
    """The caller's run ``run_id`` of session ``session_id`` or 404."""
    if not valid_session_id(session_id) or not is_valid_id(run_id, "run"):
        raise not_found("run")
    query = GetRun(run_id=run_id, session_id=session_id, account_id=caller.account_id)
    record = await fetch(gw, query, "run")
    if record.session_id != session_id:
        raise not_found("run")
    return to_run_state(record)


def agent_overrides(gw: Gateway, overrides: AgentConfigOverrides | None) -> dict[str, Any] | None:
    """``overrides`` as config input, once the deployment's config with them on top is known to
    work: a config no run could start with answers 422 with its code (``unknown_provider``,
    ``invalid_config``) instead of failing every run later."""
    if overrides is None:
        return None
    values = overrides.overrides()
    try:
        agent_config(gw.ctx.settings, values)
    except ConfigError as exc:
        payload = exc.to_payload()
        raise ApiError(422, payload.code, payload.message, details=payload.details) from exc
    return values
