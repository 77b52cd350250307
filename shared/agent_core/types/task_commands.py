"""Commands on a task list: the message contract of the task stream (one discriminated union).

Every command names its list (``session_id`` + ``list_name``, the name the model chose) and the
acting agent (``agent_id``), so the claim rule can be checked. ``AddTask`` carries a ``task_id``
allocated by the sender, so a redelivered add is recognised instead of creating a twin.
Validate raw data with :data:`TASK_COMMAND`.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from agent_core.ids import new_id
from agent_core.types.tasks import (
    AgentId,
    Dependencies,
    ListName,
    NoteText,
    PlanRef,
    SessionId,
    TaskId,
    Text,
    Title,
)

__all__ = [
    "TASK_COMMAND",
    "AddDependency",
    "AddTask",
    "CancelTask",
    "ClaimTask",
    "CompleteTask",
    "CreateList",
    "FailTask",
    "ReleaseTask",
    "RemoveDependency",
    "TaskCommand",
    "UpdateTask",
]


class _Command(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: SessionId
    list_name: ListName
    agent_id: AgentId


class CreateList(_Command):
    """Create the task list ``list_name`` in the session, optionally tied to a plan file."""

    type: Literal["create_list"] = "create_list"
    plan: PlanRef | None = None


class AddTask(_Command):
    """Add a pending task; every dependency must already exist in the list."""

    type: Literal["add_task"] = "add_task"
    task_id: TaskId = Field(default_factory=lambda: new_id("task"))
    title: Title
    description: Text = ""
    dependencies: Dependencies = ()


class UpdateTask(_Command):
    """Replace the title and/or description and/or append a note (at least one of them)."""

    type: Literal["update_task"] = "update_task"
    task_id: TaskId
    title: Title | None = None
    description: Text | None = None
    note: NoteText | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> Self:
        if self.title is None and self.description is None and self.note is None:
            raise ValueError("an update must set title, description or note")
        return self


class _TaskTransition(_Command):
    task_id: TaskId
    note: NoteText | None = None


class ClaimTask(_TaskTransition):
    """Claim a ready task for ``agent_id`` (pending → in_progress)."""

    type: Literal["claim_task"] = "claim_task"


class ReleaseTask(_TaskTransition):
    """Give a claimed task back (in_progress → pending); only its claimant can."""

    type: Literal["release_task"] = "release_task"


class CompleteTask(_TaskTransition):
    """Mark a claimed task completed; only its claimant can. ``note`` holds the result."""

    type: Literal["complete_task"] = "complete_task"


class FailTask(_TaskTransition):
    """Mark a claimed task failed; only its claimant can. ``note`` holds the reason."""

    type: Literal["fail_task"] = "fail_task"


class CancelTask(_TaskTransition):
    """Cancel a pending task, or a claimed one through its claimant."""

    type: Literal["cancel_task"] = "cancel_task"


class AddDependency(_Command):
    """Make pending task ``task_id`` depend on ``depends_on`` (refused if it closes a cycle)."""

    type: Literal["add_dependency"] = "add_dependency"
    task_id: TaskId
    depends_on: TaskId


class RemoveDependency(_Command):
    """Drop the dependency of pending task ``task_id`` on ``depends_on``."""

    type: Literal["remove_dependency"] = "remove_dependency"
    task_id: TaskId
    depends_on: TaskId


TaskCommand = Annotated[
    CreateList
    | AddTask
    | UpdateTask
    | ClaimTask
    | ReleaseTask
    | CompleteTask
    | FailTask
    | CancelTask
    | AddDependency
    | RemoveDependency,
    Field(discriminator="type"),
]
TASK_COMMAND: Final[TypeAdapter[TaskCommand]] = TypeAdapter(TaskCommand)
