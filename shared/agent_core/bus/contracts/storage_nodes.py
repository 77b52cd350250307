"""Storage commands that append to a session's tree and timeline: a node with its event, or an
event with no node.

Each command names its result model (``result_type``); the union of every storage command is
:mod:`agent_core.bus.contracts.storage`'s, which re-exports these names.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from agent_core.bus.contracts._replies import ResultType
from agent_core.bus.contracts._storage_base import EventPlaced, RunFence, _Command
from agent_core.types.runtime import Node, TimelineEvent

__all__ = ["AppendEvent", "AppendEventResult", "AppendNode", "AppendNodeResult"]


class AppendNodeResult(EventPlaced):
    """A node the writer wrote (:class:`AppendNode`'s result, :class:`EndRun`'s ``node``):
    its ``node_seq`` and its event's place; ``artifact_ids``: the large JSON blocks it moved
    out into artifacts."""

    node_id: str
    node_seq: int
    created_at: str
    artifact_ids: list[str]


class AppendNode(_Command):
    """Append a node and its event in one transaction; optionally make it the active node.

    A node of a run that has ended is refused (``run_ended``): a run's last node is the one its
    :class:`EndRun` wrote. ``events``: more timeline events of the node written after its own in
    the same transaction (a tool node's ``tool_started`` and ``tool_completed`` /
    ``tool_failed`` per call, a memory node's ``memory_injected``), so a worker lost after the
    write loses none of them; their ``node_id`` is the node's when unset.
    """

    type: Literal["append_node"] = "append_node"
    result_type: ClassVar[ResultType] = AppendNodeResult
    node: Node
    event: TimelineEvent
    fence: RunFence | None = None
    set_active: bool = True
    events: list[TimelineEvent] = Field(default_factory=list, max_length=1024)


class AppendEventResult(EventPlaced):
    """:class:`AppendEvent`'s result."""

    created_at: str


class AppendEvent(_Command):
    """Append a lifecycle event that has no node."""

    type: Literal["append_event"] = "append_event"
    result_type: ClassVar[ResultType] = AppendEventResult
    event: TimelineEvent
    fence: RunFence | None = None
