"""Typed request/reply to the task-wal service, for the task tools and the gateway (no file I/O).

Build it from a service's context: ``TaskClient(ctx.rpc, ctx.names,
timeout_s=ctx.settings.bus.request_timeout_s)``. A command is sent with a ``request_id`` and, when
no reply comes in time, sent again with the same id: task-wal applies a request id at most once,
so the retry returns the first outcome's state (``duplicate=True``) instead of applying it twice.
A refusal comes back as :class:`TaskServiceError`, whose ``payload`` can be shown to the model.
"""

from __future__ import annotations

from typing import Any, TypeVar

from agent_core.bus.contracts.tasks import (
    TaskChangeResult,
    TaskCommandMessage,
    TaskDagView,
    TaskListsView,
    TaskQueryMessage,
    TaskReply,
    TaskScope,
)
from agent_core.bus.names import BusNames
from agent_core.bus.rpc import RpcClient
from agent_core.errors import AgentCoreError, BusTimeoutError, ErrorPayload, SchemaError
from agent_core.ids import new_id
from agent_core.types.task_commands import TaskCommand

__all__ = ["TaskClient", "TaskServiceError"]

D = TypeVar("D", TaskChangeResult, TaskDagView, TaskListsView)


class TaskServiceError(AgentCoreError):
    """task-wal refused or could not carry out a request; ``payload`` is its error as sent."""

    error_type = "task_error"

    def __init__(self, payload: ErrorPayload) -> None:
        super().__init__(
            payload.code, payload.message, retryable=payload.retryable, details=payload.details
        )
        self.payload = payload


class TaskClient:
    """Commands and queries of task lists over the bus; one per process is enough."""

    def __init__(
        self, rpc: RpcClient, names: BusNames, *, timeout_s: float = 10.0, attempts: int = 3
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self._rpc = rpc
        self._stream = names.task_commands
        self._timeout_s = timeout_s
        self._attempts = attempts

    async def execute(
        self,
        command: TaskCommand,
        *,
        scope: TaskScope,
        request_id: str | None = None,
        include_dag: bool = False,
    ) -> TaskChangeResult:
        """Apply ``command`` to its list; return once the change is durable.

        Raises :class:`TaskServiceError` when refused (a rule, a corrupt WAL, a scope task-wal cannot use) and
        :class:`BusTimeoutError` when every attempt timed out (the change may still have happened:
        retry with the same ``request_id``).
        """
        message = TaskCommandMessage(
            request_id=request_id or new_id("cmd"),
            session_id=command.session_id,
            scope=scope,
            list_name=command.list_name,
            agent_id=command.agent_id,
            operation=command,
            include_dag=include_dag,
        )
        return await self._call(message, TaskChangeResult)

    async def get_dag(self, session_id: str, scope: TaskScope, list_name: str) -> TaskDagView:
        """One DAG with its ready and blocked sets."""
        query = TaskQueryMessage(session_id=session_id, scope=scope, list_name=list_name)
        return await self._call(query, TaskDagView)

    async def list_dags(self, session_id: str, scope: TaskScope) -> TaskListsView:
        """The task lists of a session (corrupt ones flagged unavailable, with their error)."""
        query = TaskQueryMessage(session_id=session_id, scope=scope)
        return await self._call(query, TaskListsView)

    async def _call(self, message: TaskCommandMessage | TaskQueryMessage, expected: type[D]) -> D:
        reply = await self._request(message)
        if not reply.ok:
            raise TaskServiceError(reply.error or _missing_error())
        if not isinstance(reply.data, expected):
            raise SchemaError(
                "invalid_reply",
                f"task-wal answered with {type(reply.data).__name__}, not {expected.__name__}",
            )
        return reply.data

    async def _request(self, message: Any) -> TaskReply:
        for attempt in range(1, self._attempts + 1):
            try:
                return await self._rpc.request(
                    message, stream=self._stream, reply=TaskReply, timeout_s=self._timeout_s
                )
            except BusTimeoutError:
                if attempt == self._attempts:
                    raise
        raise AssertionError("unreachable")  # the loop returns or raises


def _missing_error() -> ErrorPayload:
    return ErrorPayload(
        type="task_error", code="task_error", message="task-wal refused the request"
    )
