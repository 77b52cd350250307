"""Contracts of the task stream (run-workers and gateway → task-wal, request/reply).

The operation itself is the task domain's command union (``agent_core.tasks``); this envelope says
which DAG it targets. Until the domain package pins its union, ``operation`` is validated there.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from agent_core.bus.contracts._base import BusMessage
from agent_core.errors import ErrorPayload

__all__ = ["TASK_MESSAGE", "TaskCommandMessage", "TaskMessage", "TaskQueryMessage", "TaskReply"]


class TaskCommandMessage(BusMessage):
    """A change to one task list of a session; acknowledged only after its WAL append is durable."""

    type: Literal["task_command"] = "task_command"
    request_id: str = Field(min_length=1, max_length=64)
    session_id: str
    cwd: str
    list_name: str = Field(min_length=1, max_length=200)
    agent_id: str | None = None
    operation: dict[str, Any]


class TaskQueryMessage(BusMessage):
    """Read a session's task lists (``list_name=None``) or one DAG."""

    type: Literal["task_query"] = "task_query"
    session_id: str
    cwd: str
    list_name: str | None = None


TaskMessage = Annotated[TaskCommandMessage | TaskQueryMessage, Field(discriminator="type")]
TASK_MESSAGE: TypeAdapter[TaskMessage] = TypeAdapter(TaskMessage)


class TaskReply(BusMessage):
    """The answer of task-wal."""

    type: Literal["task_reply"] = "task_reply"
    ok: bool
    data: Any = None
    error: ErrorPayload | None = None
