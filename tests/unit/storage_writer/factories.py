"""Commands with fresh ids for the storage-writer tests."""

from __future__ import annotations

import secrets
from typing import Any

from agent_core.bus.contracts.storage import (
    AppendNode,
    ClaimRun,
    CreateRun,
    CreateSession,
    EndRun,
    PlaceMessage,
    RunFence,
)
from agent_core.ids import new_id, new_session_id
from agent_core.types.enums import EndReason, EventType, Role, RunStatus
from agent_core.types.protocol import TextBlock, Usage
from agent_core.types.runtime import Node, RunEnd, TimelineEvent


def create_session(session_id: str | None = None, account: str = "acct_a") -> CreateSession:
    """A ``create_session`` command with fresh ids."""
    return CreateSession(
        command_id=new_id("cmd"),
        session_id=session_id or new_session_id(),
        account_id=account,
        cwd="workspace",
        root_agent_id=new_id("agent"),
    )


def append_node(
    session: CreateSession, *, parent_id: str | None = None, run_id: str | None = None, **kw: Any
) -> AppendNode:
    """An ``append_node`` of a user text node with its ``node_created`` event."""
    node_id = new_id("node")
    return AppendNode(
        command_id=new_id("cmd"),
        session_id=session.session_id,
        node=Node(
            node_id=node_id,
            parent_id=parent_id,
            agent_id=session.root_agent_id,
            run_id=run_id,
            role=Role.USER,
            content=kw.pop("content", [TextBlock(text=f"hello {secrets.token_hex(2)}")]),
        ),
        event=TimelineEvent(
            event_id=new_id("evt"),
            event_type=EventType.NODE_CREATED,
            agent_id=session.root_agent_id,
            run_id=run_id,
        ),
        **kw,
    )


def create_run(session: CreateSession) -> CreateRun:
    """A queued run of the session's root agent."""
    return CreateRun(
        command_id=new_id("cmd"),
        session_id=session.session_id,
        run_id=new_id("run"),
        agent_id=session.root_agent_id,
    )


def end_run(
    session: CreateSession,
    run_id: str,
    *,
    attempt: int | None = 1,
    status: RunStatus = RunStatus.COMPLETED,
    reason: EndReason = EndReason.COMPLETED,
    answer: str | None = None,
    **kw: Any,
) -> EndRun:
    """An ``end_run`` by attempt ``attempt`` (``None``: unfenced), with an answer node when given."""
    node = event = None
    last = kw.pop("last_node_id", None)
    if answer is not None:
        node = Node(
            node_id=new_id("node"),
            parent_id=kw.pop("parent_id", None),
            agent_id=session.root_agent_id,
            run_id=run_id,
            role=Role.ASSISTANT,
            content=[TextBlock(text=answer)],
        )
        event = TimelineEvent(
            event_id=new_id("evt"),
            event_type=EventType.NODE_CREATED,
            agent_id=session.root_agent_id,
            run_id=run_id,
        )
        last = node.node_id
    end = RunEnd(
        status=status,
        end_reason=reason,
        turns=kw.pop("turns", 1),
        usage=kw.pop("usage", Usage(input_tokens=5, output_tokens=7)),
        error=kw.pop("error", None),
        last_node_id=last,
    )
    return EndRun(
        command_id=new_id("cmd"),
        session_id=session.session_id,
        run_id=run_id,
        fence=None if attempt is None else RunFence(run_id=run_id, attempt=attempt),
        end=end,
        event_id=new_id("evt"),
        node=node,
        node_event=event,
        **kw,
    )


def claim_run(
    session: CreateSession,
    run_id: str,
    attempt: int = 1,
    *,
    place: AppendNode | None = None,
    **kw: Any,
) -> ClaimRun:
    """A ``claim_run`` of attempt ``attempt``; ``place``: the node and event of an
    ``append_node`` become the message it places."""
    return ClaimRun(
        command_id=new_id("cmd"),
        session_id=session.session_id,
        fence=RunFence(run_id=run_id, attempt=attempt),
        place=None if place is None else PlaceMessage(node=place.node, event=place.event),
        **kw,
    )
