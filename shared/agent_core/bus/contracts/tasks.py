"""Contracts of the task stream (run-workers and gateway → task-wal, request/reply).

A command carries one command of the task domain (:data:`agent_core.tasks.TaskCommand`) and the
session's :class:`TaskScope`: its account and its project by logical name (``workspace``, a project
root's name, ``<root>/<folder>``), never a host path. task-wal resolves the scope against its own
home and configuration (the ``local`` engine: ``<project>/.soong-agent/tasks/<session_id>/``;
``s3``: keys of the file store). A message of the old form (an absolute ``cwd``) is refused as
invalid and dead-lettered with the reason. The envelope repeats ``session_id`` and ``list_name`` so they can be read without the operation; they
must agree with it. ``request_id`` makes retries safe: a request seen before is not applied again.

Session ids and the scope are checked by task-wal (which answers with an error), not here, so that
one bad field yields a reply the caller can show instead of a dead letter it never hears about.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from agent_core.bus.contracts._base import BusMessage
from agent_core.errors import ErrorPayload
from agent_core.types._fields import AccountId, LogicalPath
from agent_core.types.task_commands import TaskCommand
from agent_core.types.tasks import Task, TaskDAG, TaskWalEvent

__all__ = [
    "TASK_MESSAGE",
    "TaskChangeResult",
    "TaskCommandMessage",
    "TaskDagView",
    "TaskListInfo",
    "TaskListsView",
    "TaskMessage",
    "TaskQueryMessage",
    "TaskReply",
    "TaskReplyData",
    "TaskScope",
]


class TaskScope(BaseModel):
    """Where a session's task lists live, as every host names it (no host path)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    account_id: AccountId
    project: LogicalPath = "workspace"  # agent_core.tools.projects.WORKSPACE_PROJECT


class _ScopedMessage(BusMessage):
    @model_validator(mode="before")
    @classmethod
    def _no_host_path(cls, data: object) -> object:
        # The old form named the project by its host folder: say so instead of "extra field".
        if isinstance(data, dict) and "cwd" in data:
            raise ValueError(
                "task messages name the project by `scope` (account and logical project), "
                "not by a host folder `cwd`"
            )
        return data


class TaskCommandMessage(_ScopedMessage):
    """A change to one task list of a session; acknowledged only after its WAL append is durable.

    ``include_dag`` asks for the whole DAG in the reply (for a task board); otherwise the reply
    holds the records written and the task the command touched.
    """

    type: Literal["task_command"] = "task_command"
    request_id: str = Field(min_length=1, max_length=64)
    session_id: str
    scope: TaskScope
    list_name: str = Field(min_length=1, max_length=200)
    agent_id: str | None = None
    operation: TaskCommand
    include_dag: bool = False

    @model_validator(mode="after")
    def _envelope_matches_operation(self) -> Self:
        op = self.operation
        if (op.session_id, op.list_name) != (self.session_id, self.list_name):
            raise ValueError("session_id and list_name must match the operation's")
        if self.agent_id is not None and self.agent_id != op.agent_id:
            raise ValueError("agent_id must match the operation's")
        return self


class TaskQueryMessage(_ScopedMessage):
    """Read one DAG (``list_name`` set) or the task lists of a session (``list_name=None``)."""

    type: Literal["task_query"] = "task_query"
    session_id: str
    scope: TaskScope
    list_name: str | None = None


TaskMessage = Annotated[TaskCommandMessage | TaskQueryMessage, Field(discriminator="type")]
TASK_MESSAGE: TypeAdapter[TaskMessage] = TypeAdapter(TaskMessage)


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskDagView(_View):
    """A DAG with its derived sets: ``ready`` (claimable now) and ``blocked`` pending tasks."""

    kind: Literal["dag"] = "dag"
    dag: TaskDAG
    ready: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()


class TaskChangeResult(_View):
    """The outcome of an accepted command.

    ``changed`` is false when the effect already held (nothing written); ``duplicate`` is true
    when this ``request_id`` had already been applied (a retry), in which case nothing was written
    again and ``events`` is empty. ``seq`` is the list's last record after the command.
    """

    kind: Literal["change"] = "change"
    list_name: str
    seq: int
    changed: bool
    duplicate: bool = False
    events: tuple[TaskWalEvent, ...] = ()
    task: Task | None = None
    dag: TaskDagView | None = None


class TaskListInfo(_View):
    """One task list of a session; an unavailable (corrupt) list carries its error."""

    name: str | None
    file_name: str
    available: bool
    seq: int = 0
    task_count: int = 0
    status_counts: dict[str, int] = Field(default_factory=dict)
    error: ErrorPayload | None = None


class TaskListsView(_View):
    """The task lists of a session, by file name order."""

    kind: Literal["lists"] = "lists"
    session_id: str
    lists: list[TaskListInfo] = Field(default_factory=list)


TaskReplyData = Annotated[
    TaskDagView | TaskChangeResult | TaskListsView, Field(discriminator="kind")
]


class TaskReply(BusMessage):
    """The answer of task-wal: ``data`` when ``ok``, else ``error`` (shown to the model as is)."""

    type: Literal["task_reply"] = "task_reply"
    ok: bool
    data: TaskReplyData | None = None
    error: ErrorPayload | None = None
