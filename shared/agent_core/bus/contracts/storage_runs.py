"""Storage commands of a run's life: create it, claim it (placing its message), change it, end it.

Each command names its result model (``result_type``); the union of every storage command is
:mod:`agent_core.bus.contracts.storage`'s, which re-exports these names.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import AwareDatetime, Field, model_validator

from agent_core.bus.contracts._base import SQLITE_INT_MAX, BusMessage
from agent_core.bus.contracts._replies import ResultType
from agent_core.bus.contracts._storage_base import EventPlaced, RunFence, RunResult, _Command
from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.bus.contracts.storage_nodes import AppendNodeResult
from agent_core.errors import ErrorPayload
from agent_core.types.enums import AgentType, EndReason, RunStatus
from agent_core.types.protocol import Usage
from agent_core.types.runtime import Node, RunEnd, TimelineEvent
from agent_core.types.storage import NodeRecord

__all__ = [
    "ClaimRun",
    "ClaimRunResult",
    "CreateRun",
    "CreateRunResult",
    "EndRun",
    "EndRunResult",
    "PlaceMessage",
    "PlacedNode",
    "UpdateRun",
    "UpdateRunResult",
]


class CreateRunResult(RunResult):
    """:class:`CreateRun`'s result: the run's agent and what its worker needs of the session
    (``cwd``; ``session_config``: the session's stored config overrides, only when it has some)."""

    agent_id: str
    agent_type: AgentType
    cwd: str
    session_config: dict[str, Any] | None = None


class CreateRun(_Command):
    """Create a run in ``queued`` (or ``pending``) state.

    ``agent_id`` ``None`` means the session's root agent. With ``account_id`` the session must
    belong to that account, else the command is refused as ``session_not_found`` (the same answer
    as for a session that does not exist); an archived session refuses it as ``session_archived``.
    The receipt's result names the run's ``agent_id`` and ``agent_type`` and the session's ``cwd``
    and, when the session keeps agent config
    overrides in its metadata (``SESSION_CONFIG_KEY``), carries them as ``session_config``.

    ``expires_at``: when the sender stops waiting for the receipt (it then answers its client
    with a timeout and never queues the run). Applied later — a writer that was down meanwhile —
    the command is refused as ``expired`` and writes nothing, so no run is left ``queued`` that
    nobody will queue. A repeat of a command applied in time still gets its receipt. Sender and
    writer read the same clock (one host, or hosts kept in sync).
    """

    type: Literal["create_run"] = "create_run"
    result_type: ClassVar[ResultType] = CreateRunResult
    run_id: str
    agent_id: str | None = None
    account_id: str | None = None
    start_node_id: str | None = None
    status: Literal[RunStatus.QUEUED, RunStatus.PENDING] = RunStatus.QUEUED
    metadata: dict[str, Any] = Field(default_factory=dict)
    expires_at: AwareDatetime | None = None


class PlacedNode(BusMessage):
    """Where a claim placed its run's message."""

    node_id: str
    node_seq: int
    parent_id: str | None


class PlaceMessage(BusMessage):
    """The run's message, placed by the claim that starts the run (see :class:`ClaimRun`)."""

    node: Node  # ``parent_id`` None: under the session's active node as it is then
    event: TimelineEvent
    set_active: bool = True
    # A new root of the tree (``parent_node_id="root"``): ``parent_id`` None means no parent.
    at_root: bool = False


class ClaimRunResult(RunResult):
    """:class:`ClaimRun`'s result; with ``place``, ``placed`` (``None`` with ``place_error``
    when the message could not be placed; the claim stands)."""

    placed: PlacedNode | None = None
    place_error: Literal[RefusalCode.PARENT_NOT_FOUND] | None = None
    path: list[NodeRecord] | None = None  # with ``return_path``: see ClaimRun


class ClaimRun(_Command):
    """A worker takes a run: ``attempt`` must exceed the stored attempt; the run becomes ``running``.

    With ``place`` the same transaction appends the run's message node — under
    ``place.node.parent_id`` when given, else under the session's active node at that moment (the
    root when there is none) — as :class:`AppendNode` would. The result's ``placed`` holds the
    node's ``node_id``, ``node_seq`` and ``parent_id``; a given parent that is not a node of the
    session leaves the message unplaced (``placed`` null, ``place_error`` ``parent_not_found``)
    and the claim stands.

    With ``return_path`` the result's ``path`` holds the rows of the path to the placed message,
    read in the same transaction, exactly as :class:`GetActivePath` would answer for it with
    ``after_node_id = path_after_node_id`` (a worker starting the run needs that path: this
    spares it a query). No ``path`` when the message was not placed.
    """

    type: Literal["claim_run"] = "claim_run"
    result_type: ClassVar[ResultType] = ClaimRunResult
    fence: RunFence
    place: PlaceMessage | None = None
    return_path: bool = False
    path_after_node_id: str | None = None


class UpdateRunResult(RunResult):
    """:class:`UpdateRun`'s result."""


class UpdateRun(_Command):
    """Change a run that has not ended; status transitions are validated (``queued`` ↔
    ``pending``; a run's current attempt moves it between ``running`` and ``pending`` while it waits
    for a decision). A run ends through :class:`EndRun` only; a terminal run never changes again.
    """

    type: Literal["update_run"] = "update_run"
    result_type: ClassVar[ResultType] = UpdateRunResult
    run_id: str
    fence: RunFence | None = None
    status: RunStatus | None = None
    end_node_id: str | None = None
    end_reason: EndReason | None = None
    turn_count: int | None = Field(default=None, ge=0, le=SQLITE_INT_MAX)
    usage: Usage | None = None
    error: ErrorPayload | None = None
    metadata: dict[str, Any] | None = None


class EndRunResult(RunResult):
    """:class:`EndRun`'s result: the terminal ``event`` and the ``node`` the run ended on."""

    node: AppendNodeResult | None = None
    event: EventPlaced


class EndRun(_Command):
    """End a run: its row, its one terminal event and the node it ends on, in one transaction.

    The run row gets ``end``'s status, end reason, turns, usage, error and end node; the terminal
    timeline event (``run_completed`` / ``run_failed`` / ``run_cancelled`` / ``run_aborted``, id
    ``event_id``) is written with it, preceded by a ``run_error`` event when the run failed with an
    error; ``node`` (with its ``node_created`` event ``node_event``) is the node the run ends on — its
    answer, a partial answer, the results of tool calls it never finished — and becomes the
    session's active node when ``set_active``. ``withdraw``: the run is cancelled before it stored
    anything after its message; the session's active node, if it is one of the run's nodes, goes
    back to the parent of the run's start node. The run's agent goes back to ``idle`` (a root
    agent) or to its end state (a child agent) unless another run of it is active.

    From then on every node, event or end of the run is refused (``run_ended``). ``fence`` is the
    current attempt's; without one only a run that no attempt has claimed can end (a run
    cancelled while it was queued). A repeat (same ``event_id``) gets the first result back.
    """

    type: Literal["end_run"] = "end_run"
    result_type: ClassVar[ResultType] = EndRunResult
    run_id: str
    fence: RunFence | None = None
    end: RunEnd
    event_id: str
    node: Node | None = None
    node_event: TimelineEvent | None = None
    set_active: bool = True
    withdraw: bool = False
    # The model the run's usage is counted under in the account's totals (``None``: unknown).
    model: str | None = Field(default=None, max_length=200)

    @model_validator(mode="after")
    def _node_with_its_event(self) -> EndRun:
        if (self.node is None) != (self.node_event is None):
            raise ValueError("node and node_event come together")
        if self.node is not None and self.end.last_node_id != self.node.node_id:
            raise ValueError("a run that ends with a node ends on it (end.last_node_id)")
        return self
