"""What the agent loop shares with its steps, and what a model turn leads to.

The loop's steps — streaming a model call (:mod:`agent_core.runtime.model_stream`), a tool turn
(:mod:`agent_core.runtime.tool_turn`), the hook steps (:mod:`agent_core.runtime.hook_steps`) —
are handed one :class:`StepContext` that the loop builds once. It is everything a step may use
of the loop: the run's ports, and callables bound to the loop for what changes its state
(storing a node, the phase, the text streamed but not yet stored). A step never sees the loop
itself, so the loop's bookkeeping stays the loop's.

:data:`NextStep` is what the loop makes of one model turn: the run's :class:`Ending`,
:class:`Continue` (call the model again) or :class:`Overflow` (compact, then call it again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from agent_core.errors import ErrorPayload
from agent_core.hooks.run import RunHooks
from agent_core.ids import new_id
from agent_core.provider.base import ProviderAdapter
from agent_core.runtime.ending import Ending
from agent_core.runtime.ports import EventSink, RunStore, ToolRunner
from agent_core.types.enums import EndReason, NodeType, Role, RunStatus
from agent_core.types.protocol import ContentBlock
from agent_core.types.runtime import (
    Node,
    RunHandle,
    RunNodeCreated,
    RunPhase,
    RunTaskChanged,
    RunTextDelta,
    RunToolResult,
    RunToolStarted,
    RunUsage,
    TimelineEvent,
)

__all__ = [
    "AnnouncePhase",
    "AnnouncedPhase",
    "AppendNode",
    "Continue",
    "EndRun",
    "LoopPhase",
    "NextStep",
    "Overflow",
    "StepContext",
    "child_node",
]

# What the loop is doing, for the end a cancel gets (``tools``: ``aborted_tools``).
LoopPhase = Literal["idle", "streaming", "tools"]
# What a ``RunPhase`` event announces (``model``: the call is made, nothing has arrived yet).
AnnouncedPhase = Literal["model", "streaming", "tools"]

E = TypeVar(
    "E",
    RunTextDelta,
    RunToolStarted,
    RunToolResult,
    RunNodeCreated,
    RunUsage,
    RunTaskChanged,
    RunPhase,
)


class AppendNode(Protocol):
    """Stores a node under the last of ``nodes`` and returns it once the store committed it.

    The stored node is appended to ``nodes`` and announced (``node_created``); ``events`` are
    timeline events written in the same transaction. A cancel while the node is written lets
    the write finish first (the node is then on ``nodes``), then goes on."""

    async def __call__(
        self,
        nodes: list[Node],
        role: Role,
        blocks: list[ContentBlock],
        *,
        node_type: NodeType = NodeType.MESSAGE,
        metadata: dict[str, Any] | None = None,
        events: Sequence[TimelineEvent] = (),
    ) -> Node: ...


def child_node(
    handle: RunHandle,
    parent: Node,
    role: Role,
    blocks: list[ContentBlock],
    *,
    node_type: NodeType = NodeType.MESSAGE,
    metadata: dict[str, Any] | None = None,
) -> Node:
    """The node a run appends under ``parent``, not yet stored: a new id, the run's agent and
    run ids (what :class:`AppendNode` stores)."""
    return Node(
        node_id=new_id("node"),
        parent_id=parent.node_id,
        agent_id=handle.agent_id,
        run_id=handle.run_id,
        role=role,
        node_type=node_type,
        content=blocks,
        metadata=metadata or {},
    )


class AnnouncePhase(Protocol):
    """Emits a ``RunPhase`` event: what the run does now, in which turn of how many."""

    def __call__(self, phase: AnnouncedPhase, tools: int = 0) -> None: ...


class EndRun(Protocol):
    """The run's end after what the loop did so far (not written: the driver writes it)."""

    def __call__(
        self, status: RunStatus, reason: EndReason, *, error: ErrorPayload | None = None
    ) -> Ending: ...


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a loop step may use of its loop (see the module docstring).

    The ports are the loop's own: ``tools`` and ``hooks`` are ``None`` when the run has none.
    ``tool_slots`` bounds how many tool calls run at once (the loop's ``max_parallel_tools``).
    ``set_phase`` and ``set_partial_text`` keep what a cancel's end is built on: the phase
    (``tools`` while tools run) and the text streamed in this turn that no stored node holds
    yet (``""`` once a node holds it)."""

    handle: RunHandle
    model: ProviderAdapter
    store: RunStore
    events: EventSink
    tools: ToolRunner | None
    hooks: RunHooks | None
    tool_slots: asyncio.Semaphore
    append: AppendNode
    announce_phase: AnnouncePhase
    set_phase: Callable[[LoopPhase], None]
    set_partial_text: Callable[[str], None]
    end: EndRun

    def event(self, cls: type[E], **fields: Any) -> E:
        """A runtime event of this run (its run, session and agent ids filled in); not emitted."""
        return cls(
            run_id=self.handle.run_id,
            session_id=self.handle.session_id,
            agent_id=self.handle.agent_id,
            **fields,
        )


@dataclass(frozen=True, slots=True)
class Continue:
    """Call the model again on the path as it now is: the turn's tool results are stored, a cut
    answer's continuation was asked for, or a Stop hook denied the end."""


@dataclass(frozen=True, slots=True)
class Overflow:
    """The model call overflowed its context window and may be retried: compact the path, then
    call the model again (the context guard allows it once per overflow)."""


NextStep = Ending | Continue | Overflow
