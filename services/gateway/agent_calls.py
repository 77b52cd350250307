"""A named assistant called from another protocol (MCP, A2A): one run, like any other.

The MCP server and the A2A endpoint are two more doors to the same path the API's own routes
take: a call creates a session from the assistant (the session route itself, so the pinned
version, the config check and the workspace are the same) or continues one of the caller's
sessions made from that assistant, then posts the message (the message route itself: the
tree, permissions, hooks and limits apply as they do to any run). What the run streams is read
from its live stream (the SSE hub's one shared read) and told to the client in that protocol's
terms; its answer is the text of the run's last node and its output files are the artifacts the
run registered, each with the URL of the API's download route.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from fastapi import Response
from pydantic import ValidationError

from agent_core import runqueue
from agent_core.bus.contracts.storage import GetNode, ListArtifacts
from agent_core.errors import redact
from agent_core.types.api import (
    Assistant,
    AssistantPin,
    CreateSessionRequest,
    MessageAccepted,
    PostMessageRequest,
)
from agent_core.types.enums import RunStatus
from agent_core.types.mappers import to_artifact_ref, to_node
from agent_core.types.protocol import TextBlock
from services.gateway.auth import Caller
from services.gateway.errors import ApiError, not_found
from services.gateway.routes_assistants import get_assistant
from services.gateway.routes_messages import post_message
from services.gateway.routes_sessions import create_session
from services.gateway.state import Gateway, fetch_optional, get_run, get_session

__all__ = [
    "Call",
    "Outcome",
    "OutputFile",
    "Progress",
    "cancel",
    "find_assistant",
    "follow",
    "outcome",
    "read_batch",
    "start",
]

# A message's length cap: the message route's own.
MAX_MESSAGE_CHARS: Final = 1_000_000
_BLOCK_MS: Final = 4000
# Idle reads with a terminal run record before the follow ends without its run_finished (a
# run ended by a sweeper may never write one; the SSE route waits as long).
_IDLE_TERMINAL: Final = 2


@dataclass(frozen=True, slots=True)
class Call:
    """A started call: the assistant, its session and the run."""

    assistant: Assistant
    session_id: str
    run_id: str


@dataclass(frozen=True, slots=True)
class OutputFile:
    """A file the run made (an artifact), with the URL that downloads it."""

    artifact_id: str
    name: str
    mime_type: str | None
    size_bytes: int | None
    url: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended: its status, answer, files and, when it failed, the error (redacted)."""

    status: RunStatus
    text: str
    files: list[OutputFile]
    error_code: str | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the run completed."""
        return self.status is RunStatus.COMPLETED


@dataclass(slots=True)
class Progress:
    """What one read of a run's stream says to a client that watches it.

    ``text``: the answer's new text (the batch's deltas of the run itself, joined);
    ``restart``: a new attempt of the model call began, so the text streamed so far is void;
    ``notes``: steps worth a line (a tool started, a permission asked); ``finished``: the run's
    own ``run_finished`` payload, when the batch ends it; ``events``: how many events it held.
    """

    text: str = ""
    restart: bool = False
    notes: list[str] = field(default_factory=list)
    finished: dict[str, Any] | None = None
    events: int = 0


def read_batch(
    batch: Sequence[tuple[str, str, bytes]], run_id: str, attempt: list[int]
) -> Progress:
    """The :class:`Progress` of one batch of ``(entry id, event type, JSON)`` (pure).

    Only the run's own text counts (its child runs stream on the same stream under their own
    run id); ``attempt`` is the caller's one-item cell of the attempt seen last.
    """
    out = Progress(events=len(batch))
    parts: list[str] = []
    for _, kind, raw in batch:
        if kind not in _READ:
            continue
        data = json.loads(raw)
        own = data.get("run_id") == run_id
        if kind == "text_delta":
            if not own:
                continue
            seen = int(data.get("attempt") or 1)
            if seen != attempt[0]:
                attempt[0] = seen
                parts.clear()
                out.restart = True
            parts.append(str(data.get("text", "")))
        elif kind == "tool_started":
            out.notes.append(f"tool {data.get('name', '?')}")
        elif kind == "permission_requested":
            call = (data.get("request") or {}).get("tool_call") or {}
            tool = call.get("name") or "a tool"
            out.notes.append(f"waiting for permission to run {tool}")
        elif kind == "run_finished" and own:
            out.finished = data
    out.text = "".join(parts)
    return out


_READ: Final = frozenset({"text_delta", "tool_started", "permission_requested", "run_finished"})


async def find_assistant(gw: Gateway, caller: Caller, name_or_id: str) -> Assistant:
    """The caller's active assistant or 404 (another account's answers the same)."""
    assistant = await get_assistant(gw, caller, name_or_id)
    if assistant.status != "active":
        raise not_found("assistant")
    return assistant


async def start(
    gw: Gateway, caller: Caller, assistant: Assistant, text: str, session_id: str | None
) -> Call:
    """Post ``text`` to a new session made from ``assistant``, or to ``session_id`` (one of the
    caller's sessions made from that assistant, else 404); the started call."""
    try:
        body = PostMessageRequest(text=text)
    except ValidationError as exc:
        raise ApiError(422, "validation_error", "invalid message: a string of 1,000,000 "
                       "characters at most") from exc  # fmt: skip
    if not text.strip():
        raise ApiError(422, "validation_error", "invalid message: it is empty")
    if session_id is None:
        session = await create_session(
            CreateSessionRequest(assistant=assistant.assistant_id), gw, caller, Response()
        )
        session_id = session.session_id
    else:
        session = await get_session(gw, caller, session_id)
        pin = AssistantPin.of(session.metadata)
        if pin is None or pin.assistant_id != assistant.assistant_id:
            raise not_found("session")
    accepted: MessageAccepted = await post_message(session_id, body, gw, caller)
    return Call(assistant=assistant, session_id=session_id, run_id=accepted.run_id)


async def follow(gw: Gateway, caller: Caller, call: Call) -> AsyncIterator[Progress]:
    """The run's progress, batch by batch, until its own ``run_finished`` (the last item has
    ``finished``); a run ended without one (a sweeper's) ends with its record's verdict."""
    attempt = [1]
    idle_terminal = 0
    async for batch in gw.events.follow_raw(
        call.session_id, call.run_id, after="0-0", block_ms=_BLOCK_MS
    ):
        if batch is not None:
            progress = read_batch(batch, call.run_id, attempt)
            yield progress
            if progress.finished is not None:
                return
            continue
        run = await get_run(gw, caller, call.session_id, call.run_id)
        idle_terminal = idle_terminal + 1 if run.is_terminal else 0
        if idle_terminal >= _IDLE_TERMINAL:
            yield Progress(finished={"status": run.status.value, "last_node_id": None})
            return


async def outcome(
    gw: Gateway, caller: Caller, call: Call, finished: dict[str, Any], base_url: str
) -> Outcome:
    """The ended run's answer (its last node's text), files and error."""
    status = RunStatus(finished.get("status", RunStatus.FAILED.value))
    text = ""
    node_id = finished.get("last_node_id")
    if isinstance(node_id, str):
        query = GetNode(session_id=call.session_id, node_id=node_id, account_id=caller.account_id)
        record = await fetch_optional(gw, query)
        if record is not None:
            node = to_node(record)
            text = "\n".join(b.text for b in node.content if isinstance(b, TextBlock))
    query_files = ListArtifacts(session_id=call.session_id, account_id=caller.account_id)
    base = base_url.rstrip("/")
    files = [
        OutputFile(
            artifact_id=ref.artifact_id,
            name=ref.filename or ref.path.rsplit("/", 1)[-1],
            mime_type=ref.mime_type,
            size_bytes=ref.size_bytes,
            url=f"{base}/v1/sessions/{call.session_id}/artifacts/{ref.artifact_id}/content",
        )
        for ref in (to_artifact_ref(r) for r in await fetch_optional(gw, query_files) or [])
        if ref.run_id == call.run_id
    ]
    error = finished.get("error") if isinstance(finished.get("error"), dict) else None
    return Outcome(
        status=status,
        text=text,
        files=files,
        error_code=str(error.get("code")) if error else None,
        error_message=redact(str(error.get("message", ""))) if error else None,
    )


async def cancel(gw: Gateway, call: Call) -> None:
    """Ask the run to stop (the message route's cancel: queued runs never start)."""
    await runqueue.cancel_run(gw.storage, gw.queue, session_id=call.session_id, run_id=call.run_id)


async def cancel_quietly(gw: Gateway, call: Call) -> None:
    """:func:`cancel`, shielded and never raising: for a client that went away mid-run."""
    try:
        await asyncio.shield(cancel(gw, call))
    except Exception:  # the run goes on; its own limits end it
        return
