"""What the session FIFO holds: one queued run, as the gateway submitted it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_core.types.api import ROOT_PARENT
from agent_core.types.enums import MultitaskStrategy
from agent_core.types.protocol import ContentBlock

__all__ = ["QueuedRun"]


class QueuedRun(BaseModel):
    """A run waiting in its session's FIFO (or being executed from the processing list).

    The user's message (``content``) becomes the node ``start_node_id`` when the run starts, under
    ``parent_node_id`` or — when that is ``None`` — under the session's active node *at that
    moment*: a message queued behind a running answer is placed after that answer.
    ``parent_node_id="root"`` (``ROOT_PARENT``) makes it a new root of the tree.

    ``kind="main"`` runs are serial per session. ``kind="branch"`` runs had a lane of their own
    and ran beside them; no gateway queues one any more (``branch`` is serial too), and the
    lanes stay so that one queued before an upgrade still runs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    session_id: str
    account_id: str
    agent_id: str
    start_node_id: str
    content: list[ContentBlock] = Field(default_factory=list)
    parent_node_id: str | None = None
    kind: Literal["main", "branch"] = "main"
    strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE
    config_overrides: dict[str, Any] = Field(default_factory=dict)
    # The session's working directory (fixed at its creation), so a worker need not read the
    # session to start the run; ``None`` for runs queued before it was carried here.
    cwd: str | None = None
    # ``orchestrator``: the run's agent is the orchestrator of a session in orchestrator mode.
    agent_type: Literal["main", "orchestrator"] = "main"
    enqueued_at_ms: int = 0
    # The W3C ``traceparent`` of the request that queued the run: the run's spans join its trace.
    trace_parent: str | None = Field(default=None, max_length=128)

    @property
    def at_root(self) -> bool:
        """Whether the message starts a new root of the tree (see ``ROOT_PARENT``)."""
        return self.parent_node_id == ROOT_PARENT

    @property
    def node_parent(self) -> str | None:
        """The message node's explicit parent: ``None`` under the active node or at the root."""
        return None if self.at_root else self.parent_node_id

    @property
    def lane(self) -> str:
        """The FIFO this run waits in: the session's for main runs, its own for branch runs.

        ``.`` never appears in a session id, so a branch lane can never be a session's lane.
        """
        return self.session_id if self.kind == "main" else f"{self.session_id}.{self.run_id}"
