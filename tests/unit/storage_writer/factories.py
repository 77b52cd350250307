"""Commands with fresh ids for the storage-writer tests."""

from __future__ import annotations

import secrets
from typing import Any

from agent_core.bus.contracts.storage import (
    AppendNode,
    CreateRun,
    CreateSession,
    EventDraft,
    NodeDraft,
)
from agent_core.ids import new_id, new_session_id
from agent_core.types.enums import EventType, Role
from agent_core.types.protocol import TextBlock


def create_session(session_id: str | None = None, account: str = "acct_a") -> CreateSession:
    """A ``create_session`` command with fresh ids."""
    return CreateSession(
        command_id=new_id("cmd"),
        session_id=session_id or new_session_id(),
        account_id=account,
        cwd="/tmp",
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
        node=NodeDraft(
            node_id=node_id,
            parent_id=parent_id,
            agent_id=session.root_agent_id,
            run_id=run_id,
            role=Role.USER,
            content=kw.pop("content", [TextBlock(text=f"hello {secrets.token_hex(2)}")]),
        ),
        event=EventDraft(
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
