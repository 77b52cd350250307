"""Task DAG state and the Task WAL record, as data.

State models are frozen: a rule never edits a DAG in place, it returns a new one, so a rejected
command cannot leave a half-changed DAG behind. ``blocked`` and ``ready`` are derived from the
dependencies (see :mod:`agent_core.tasks.dag`), never stored, so they can never disagree with them.

A WAL record (:class:`TaskWalEvent`) is one line: ``seq``, ``ts``, ``payload`` (one of the
:data:`TaskChange` models, discriminated by ``kind``) and ``checksum``. Payloads carry fully resolved
values (ids, actors), so replaying them needs no clock and no randomness.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from agent_core.ids import SESSION_ID_PATTERN, IdPrefix, id_pattern
from agent_core.types._fields import LogicalPath

__all__ = [
    "FINISHED_STATUSES",
    "TASK_CHANGE",
    "AgentId",
    "Dependencies",
    "DependencyAdded",
    "DependencyRemoved",
    "ListCreated",
    "ListName",
    "NoteText",
    "PlanId",
    "PlanRef",
    "SessionId",
    "Task",
    "TaskAdded",
    "TaskCancelled",
    "TaskChange",
    "TaskChangeKind",
    "TaskClaimed",
    "TaskCompleted",
    "TaskDAG",
    "TaskFailed",
    "TaskId",
    "TaskNote",
    "TaskReleased",
    "TaskStatus",
    "TaskUpdated",
    "TaskWalEvent",
    "Text",
    "Title",
]

# Bounds keep one WAL line, one bus message and one task-board node reasonably small.
MAX_NAME = 200
MAX_TITLE = 500
MAX_TEXT = 20_000
MAX_DEPENDENCIES = 100


def _id_checker(prefix: IdPrefix) -> object:
    # The id rule as a native pattern (see agent_core.ids): cheap on every replayed WAL line.
    return Field(pattern=id_pattern(prefix))


TaskId = Annotated[str, _id_checker("task")]
AgentId = Annotated[str, _id_checker("agent")]
PlanId = Annotated[str, _id_checker("plan")]
SessionId = Annotated[str, Field(pattern=rf"^{SESSION_ID_PATTERN}$")]
Title = Annotated[str, Field(min_length=1, max_length=MAX_TITLE)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
NoteText = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
ListName = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
Dependencies = Annotated[tuple[TaskId, ...], Field(max_length=MAX_DEPENDENCIES)]


class TaskStatus(StrEnum):
    """Stored status of a task; ``blocked``/``ready`` are derived from dependencies, not stored."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED_STATUSES: Final[frozenset[TaskStatus]] = frozenset(
    (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)
)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskNote(_Frozen):
    """A note appended to a task: progress, a result, a failure reason."""

    agent_id: AgentId
    text: NoteText
    at: AwareDatetime


class PlanRef(_Frozen):
    """A reference to a plan: a Markdown file in the project, written with the file tools."""

    plan_id: PlanId
    path: Annotated[LogicalPath, Field(max_length=1_000)]  # relative to the session's project

    @field_validator("path", mode="before")
    @classmethod
    def _relative(cls, value: object) -> object:
        # WALs written before plan paths were logical may hold '/plan.md': they still replay.
        return value.lstrip("/") if isinstance(value, str) else value

    title: Annotated[str, Field(max_length=MAX_TITLE)] | None = None


class Task(_Frozen):
    """One task of a DAG.

    Invariants (kept by the rules in :mod:`agent_core.tasks.dag`): a ``pending`` task has no
    claimant; an ``in_progress`` task has one; a finished task keeps the claimant that finished it
    (or none if it was cancelled while pending) and has ``finished_at``.
    """

    id: TaskId
    title: Title
    description: Text = ""
    status: TaskStatus = TaskStatus.PENDING
    dependencies: Dependencies = ()
    claimant: AgentId | None = None
    notes: tuple[TaskNote, ...] = ()
    created_at: AwareDatetime
    updated_at: AwareDatetime
    finished_at: AwareDatetime | None = None


class TaskDAG(_Frozen):
    """A named task list of one session: tasks by id (in insertion order) and the last WAL seq.

    ``seq`` is the sequence number of the last record applied; the next record gets ``seq + 1``.
    """

    name: ListName
    session_id: SessionId
    plan: PlanRef | None = None
    tasks: dict[TaskId, Task] = Field(default_factory=dict)
    seq: Annotated[int, Field(ge=1)]
    created_at: AwareDatetime
    updated_at: AwareDatetime


# ---------------------------------------------------------------------------- WAL payloads


class TaskChangeKind(StrEnum):
    """What a WAL record changed."""

    LIST_CREATED = "list_created"
    TASK_ADDED = "task_added"
    TASK_UPDATED = "task_updated"
    TASK_CLAIMED = "task_claimed"
    TASK_RELEASED = "task_released"
    TASK_COMPLETED = "task_completed"
    TASK_FAILED = "task_failed"
    TASK_CANCELLED = "task_cancelled"
    DEPENDENCY_ADDED = "dependency_added"
    DEPENDENCY_REMOVED = "dependency_removed"


class ListCreated(_Frozen):
    """The first record of every WAL: the list exists."""

    kind: Literal[TaskChangeKind.LIST_CREATED] = TaskChangeKind.LIST_CREATED
    name: ListName
    session_id: SessionId
    plan: PlanRef | None = None
    agent_id: AgentId


class TaskAdded(_Frozen):
    """A task was added (pending, unclaimed)."""

    kind: Literal[TaskChangeKind.TASK_ADDED] = TaskChangeKind.TASK_ADDED
    task_id: TaskId
    title: Title
    description: Text = ""
    dependencies: Dependencies = ()
    agent_id: AgentId


class TaskUpdated(_Frozen):
    """Title and/or description replaced and/or a note appended."""

    kind: Literal[TaskChangeKind.TASK_UPDATED] = TaskChangeKind.TASK_UPDATED
    task_id: TaskId
    title: Title | None = None
    description: Text | None = None
    note: NoteText | None = None
    agent_id: AgentId


class _Transition(_Frozen):
    task_id: TaskId
    agent_id: AgentId
    note: NoteText | None = None


class TaskClaimed(_Transition):
    """pending → in_progress, claimed by ``agent_id``."""

    kind: Literal[TaskChangeKind.TASK_CLAIMED] = TaskChangeKind.TASK_CLAIMED


class TaskReleased(_Transition):
    """in_progress → pending, given back by its claimant."""

    kind: Literal[TaskChangeKind.TASK_RELEASED] = TaskChangeKind.TASK_RELEASED


class TaskCompleted(_Transition):
    """in_progress → completed, by its claimant."""

    kind: Literal[TaskChangeKind.TASK_COMPLETED] = TaskChangeKind.TASK_COMPLETED


class TaskFailed(_Transition):
    """in_progress → failed, by its claimant."""

    kind: Literal[TaskChangeKind.TASK_FAILED] = TaskChangeKind.TASK_FAILED


class TaskCancelled(_Transition):
    """pending or in_progress → cancelled (a claimed task only by its claimant)."""

    kind: Literal[TaskChangeKind.TASK_CANCELLED] = TaskChangeKind.TASK_CANCELLED


class DependencyAdded(_Frozen):
    """``task_id`` now depends on ``depends_on``."""

    kind: Literal[TaskChangeKind.DEPENDENCY_ADDED] = TaskChangeKind.DEPENDENCY_ADDED
    task_id: TaskId
    depends_on: TaskId
    agent_id: AgentId


class DependencyRemoved(_Frozen):
    """``task_id`` no longer depends on ``depends_on``."""

    kind: Literal[TaskChangeKind.DEPENDENCY_REMOVED] = TaskChangeKind.DEPENDENCY_REMOVED
    task_id: TaskId
    depends_on: TaskId
    agent_id: AgentId


TaskChange = Annotated[
    ListCreated
    | TaskAdded
    | TaskUpdated
    | TaskClaimed
    | TaskReleased
    | TaskCompleted
    | TaskFailed
    | TaskCancelled
    | DependencyAdded
    | DependencyRemoved,
    Field(discriminator="kind"),
]
TASK_CHANGE: Final[TypeAdapter[TaskChange]] = TypeAdapter(TaskChange)


class TaskWalEvent(_Frozen):
    """One Task WAL record = one line of ``<task-name>.wal.jsonl``.

    ``seq`` starts at 1 and has no gaps; ``checksum`` is the CRC-32 (8 lowercase hex digits) of the
    canonical JSON of the record without ``checksum`` (see :mod:`agent_core.tasks.codec`).
    """

    seq: Annotated[int, Field(ge=1)]
    ts: AwareDatetime
    payload: TaskChange
    checksum: Annotated[str, Field(pattern=r"^[0-9a-f]{8}$")]

    @property
    def kind(self) -> TaskChangeKind:
        """The kind of change this record holds."""
        return self.payload.kind
