"""The account's named assistants as A2A agents (the official ``a2a-sdk``, protocol 1.0).

One agent card per assistant, at ``/a2a/{assistant}/.well-known/agent-card.json`` (by name or
id), and its JSON-RPC endpoint at ``/a2a/{assistant}``: ``SendMessage``,
``SendStreamingMessage``, ``GetTask``, ``CancelTask``. A card per assistant URL rather than one
``/.well-known/agent-card.json`` at the root: a card describes one agent with one endpoint, what
A2A clients resolve from a base URL; our assistants are per account, so the card (like the rest
of the API) takes the API key and another account's assistant is a 404 like a missing one.

The mapping: a context is a session (its id is the session's id; a message without one starts a
session from the assistant), a task is one run (its id is the run's id). The SDK's request
handler drives the protocol; what is ours is where its three seams meet the runtime:

- :class:`RunContextBuilder` posts the message (the message route itself) and names the task
  and context after the run and session it got;
- :class:`RunExecutor` follows the run: the answer streams as chunks of the ``answer`` artifact,
  steps (a tool, a permission asked) as ``working`` status messages; at the end the answer is
  the run's last node, each output file an artifact with its download URL, and the state the
  run's status (``completed``, ``failed``, ``canceled``); cancelling it cancels the run;
- :class:`RunTaskStore` keeps each task's record under its account in the bus (a day past its
  last change; in-process while it runs), and a ``canceled`` record written by another gateway
  instance cancels the run there too; a task read while its run already ended elsewhere shows
  the run's verdict.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from a2a.auth.user import User
from a2a.helpers.proto_helpers import get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext, RequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import ServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    GetTaskRequest,
    HTTPAuthSecurityScheme,
    ListTasksRequest,
    ListTasksResponse,
    Part,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    UnsupportedOperationError,
)
from fastapi import Request
from fastapi.responses import Response
from google.protobuf.json_format import MessageToJson, Parse
from starlette.requests import Request as StarletteRequest

from agent_core.bus.names import BusTtl
from agent_core.errors import AgentCoreError, redact
from agent_core.ids import is_valid_id
from agent_core.types.api import Assistant
from agent_core.types.enums import RunStatus
from services.gateway import agent_calls
from services.gateway.agent_calls import Call
from services.gateway.auth import Caller
from services.gateway.errors import ApiError
from services.gateway.state import Gateway, get_run

__all__ = ["A2AEndpoint", "card_body", "card_for", "dispatch", "state_of"]


_ANSWER: Final = "answer"
_SECRET_HEADERS: Final = frozenset({"authorization", "cookie", "proxy-authorization"})
_CALL: Final = "soong.call"
_TERMINAL: Final = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
_LIVE: Final = {
    RunStatus.QUEUED: TaskState.TASK_STATE_SUBMITTED,
    RunStatus.PENDING: TaskState.TASK_STATE_WORKING,
    RunStatus.RUNNING: TaskState.TASK_STATE_WORKING,
}
# The ends that are not a failure (``failed`` and ``aborted`` are one to A2A).
_ENDED: Final = {
    RunStatus.COMPLETED: TaskState.TASK_STATE_COMPLETED,
    RunStatus.CANCELLED: TaskState.TASK_STATE_CANCELED,
}
# How long a cancel waits for the run to stop before it answers (the run's worker stops it
# within a second; the task is ``canceled`` either way).
_CANCEL_WAIT_S: Final = 10.0
_CANCEL_POLL_S: Final = 0.1


def state_of(status: RunStatus) -> TaskState:
    """The A2A task state of a run status (pure)."""
    if status in _LIVE:
        return _LIVE[status]
    return _ENDED.get(status, TaskState.TASK_STATE_FAILED)


def card_for(assistant: Assistant, base_url: str) -> AgentCard:
    """The agent card of an assistant served at ``base_url`` (pure)."""
    url = f"{base_url.rstrip('/')}/a2a/{assistant.assistant_id}"
    description = assistant.description or f"The assistant {assistant.name} of soong-agent."
    return AgentCard(
        name=assistant.name,
        description=description,
        version=str(assistant.version),
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_1_0
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer",
                    description="An API key from `soong-agent keys create --account NAME`.",
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/octet-stream"],
        skills=[
            AgentSkill(
                id=assistant.name,
                name=assistant.name,
                description=description,
                tags=["soong-agent", "assistant"],
            )
        ],
    )


class _Account(User):
    """The API key's account, as the SDK's user."""

    def __init__(self, account_id: str) -> None:
        self._account_id = account_id

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._account_id


class _Scope:
    """What a call's context carries from the route: the gateway, caller, assistant, base URL."""

    def __init__(self, gw: Gateway, caller: Caller, assistant: Assistant, base_url: str) -> None:
        self.gw = gw
        self.caller = caller
        self.assistant = assistant
        self.base_url = base_url


def _scope(context: ServerCallContext) -> _Scope:
    scope = context.state.get("soong")
    if not isinstance(scope, _Scope):  # every request comes through the route: never here
        raise InternalError(message="internal error")
    return scope


def _a2a_error(exc: ApiError | AgentCoreError) -> A2AError:
    """The A2A error of a refusal of the API (its code in ``data``, message redacted)."""
    if isinstance(exc, ApiError):
        status, code, message = exc.status, exc.code, exc.message
    else:
        payload = exc.to_payload()
        status, code, message = 500, payload.code, payload.message
    data = {"code": code, "status": status}
    if status == 404:
        return InvalidParamsError(message=f"unknown contextId: {redact(message)}", data=data)
    if status in (400, 409, 422):
        return InvalidParamsError(message=redact(message), data=data)
    return InternalError(message=redact(message) if status < 500 else "internal error", data=data)


class _Builder(ServerCallContextBuilder):
    def build(self, request: StarletteRequest) -> ServerCallContext:
        scope: _Scope = request.state.soong
        # The SDK reads A2A-Version (and extensions) from these; never the key (its debug logs
        # print the context).
        headers = {k: v for k, v in request.headers.items() if k not in _SECRET_HEADERS}
        return ServerCallContext(
            user=_Account(scope.caller.account_id), state={"soong": scope, "headers": headers}
        )


class RunContextBuilder(RequestContextBuilder):
    """Posts the message and names the task after the run, the context after the session."""

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if params is None:
            raise InvalidParamsError(message="a message is required")
        if task_id:
            raise UnsupportedOperationError(
                message="a task is one run and takes one message: send the next one with the "
                "task's contextId (a new task of the same conversation)"
            )
        if any(not part.HasField("text") for part in params.message.parts):
            raise InvalidParamsError(message="only text parts are taken (text/plain)")
        text = get_message_text(params.message)
        scope = _scope(context)
        try:
            call = await agent_calls.start(
                scope.gw, scope.caller, scope.assistant, text, context_id or None
            )
        except (ApiError, AgentCoreError) as exc:
            raise _a2a_error(exc) from exc
        context.state[_CALL] = call
        return RequestContext(
            call_context=context,
            request=params,
            task_id=call.run_id,
            context_id=call.session_id,
        )


class RunExecutor(AgentExecutor):
    """Follows the run a message started and tells the task what it does."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        scope = _scope(context.call_context)
        call = context.call_context.state.get(_CALL)
        if not isinstance(call, Call):
            raise InternalError(message="internal error")
        updater = TaskUpdater(event_queue, call.run_id, call.session_id)
        task = Task(
            id=call.run_id,
            context_id=call.session_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
        )
        if context.message is not None:
            task.history.append(context.message)
        await event_queue.enqueue_event(task)
        try:
            await self._follow(scope, call, updater)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # told as a failed task, without its text
            name = exc.code if isinstance(exc, ApiError | AgentCoreError) else "internal_error"
            message = updater.new_agent_message([Part(text=f"the call failed ({name})")])
            await updater.failed(message)

    async def _follow(self, scope: _Scope, call: Call, updater: TaskUpdater) -> None:
        gw, caller = scope.gw, scope.caller
        finished: dict[str, Any] = {}
        started = False
        streamed = False
        await gw.slots.acquire(caller.key_id)
        try:
            async for step in agent_calls.follow(gw, caller, call):
                # The batch that ends the run may carry its last text and steps too: told first.
                if not started:
                    started = True
                    await updater.start_work()
                if step.text or step.restart:
                    await updater.add_artifact(
                        [Part(text=step.text)],
                        artifact_id=_ANSWER,
                        name=_ANSWER,
                        append=streamed and not step.restart,
                        last_chunk=False,
                    )
                    streamed = True
                for note in step.notes:
                    message = updater.new_agent_message([Part(text=note)])
                    await updater.update_status(TaskState.TASK_STATE_WORKING, message)
                if step.finished is not None:
                    finished = step.finished
                    break
        finally:
            await gw.slots.release(caller.key_id)
        outcome = await agent_calls.outcome(gw, caller, call, finished, scope.base_url)
        await updater.add_artifact(
            [Part(text=outcome.text)], artifact_id=_ANSWER, name=_ANSWER, last_chunk=True
        )
        for f in outcome.files:
            part = Part(url=f.url, filename=f.name, media_type=f.mime_type or "")
            await updater.add_artifact(
                [part], artifact_id=f.artifact_id, name=f.name, last_chunk=True
            )
        said = outcome.text if outcome.ok else (outcome.error_message or outcome.status.value)
        message = updater.new_agent_message([Part(text=said)])
        await updater.update_status(state_of(outcome.status), message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        scope = _scope(context.call_context)
        call = Call(
            assistant=scope.assistant,
            session_id=context.context_id or "",
            run_id=context.task_id or "",
        )
        await _stop_run(scope, call)


async def _stop_run(scope: _Scope, call: Call) -> None:
    """Cancel the run and wait (a while) until it has stopped."""
    try:
        run = await get_run(scope.gw, scope.caller, call.session_id, call.run_id)
        if run.is_terminal:
            return
        await agent_calls.cancel(scope.gw, call)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _CANCEL_WAIT_S
        while not run.is_terminal and loop.time() < deadline:
            await asyncio.sleep(_CANCEL_POLL_S)
            run = await get_run(scope.gw, scope.caller, call.session_id, call.run_id)
    except (ApiError, AgentCoreError) as exc:
        raise _a2a_error(exc) from exc


class RunTaskStore(TaskStore):
    """Task records under their account in the bus; a running task's in this process too."""

    def __init__(self) -> None:
        # task key → (the record, the state last written to the bus)
        self._live: dict[str, tuple[Task, int]] = {}

    @staticmethod
    def _key(scope: _Scope, task_id: str) -> str:
        return scope.gw.ctx.names.a2a_task(scope.caller.account_id, task_id)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        scope = _scope(context)
        key = self._key(scope, task.id)
        kept = Task()
        kept.CopyFrom(task)
        kept.metadata.update({"assistant_id": scope.assistant.assistant_id})
        state = kept.status.state
        last = self._live.get(key)
        # A chunk of the answer is kept here only; the bus gets each new state and the end.
        if last is None or last[1] != state or state in _TERMINAL:
            await scope.gw.ctx.redis.set(key, MessageToJson(kept), ex=BusTtl.A2A_TASK_S)
        if state in _TERMINAL:
            self._live.pop(key, None)
        else:
            self._live[key] = (kept, state)
        if state == TaskState.TASK_STATE_CANCELED:  # a cancel written by any instance
            call = Call(assistant=scope.assistant, session_id=kept.context_id, run_id=kept.id)
            await _stop_run(scope, call)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        scope = _scope(context)
        if not is_valid_id(task_id, "run"):
            return None
        key = self._key(scope, task_id)
        task = Task()
        if (live := self._live.get(key)) is not None:
            task.CopyFrom(live[0])
        else:
            raw = await scope.gw.ctx.redis.get(key)
            if raw is None:
                return None
            Parse(raw, task)
        if task.metadata.fields["assistant_id"].string_value != scope.assistant.assistant_id:
            return None  # a task of another assistant of the account: not this agent's
        return task

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        raise UnsupportedOperationError(
            message="listing tasks is not served; the API lists a session's runs"
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        scope = _scope(context)
        await scope.gw.ctx.redis.delete(self._key(scope, task_id))


class _Handler(DefaultRequestHandler):
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        task: Task | None = await super().on_get_task(params, context)
        if task is None or task.status.state in _TERMINAL:
            return task
        # Its run may have ended where nobody watched it (the instance that did went away).
        scope = _scope(context)
        try:
            run = await get_run(scope.gw, scope.caller, task.context_id, task.id)
        except (ApiError, AgentCoreError) as exc:
            raise _a2a_error(exc) from exc
        if run.is_terminal:
            seen = Task()
            seen.CopyFrom(task)
            seen.status.state = state_of(run.status)
            return seen
        return task


class A2AEndpoint:
    """The SDK's request handler and JSON-RPC dispatcher over our runs, one per process."""

    def __init__(self) -> None:
        # The handler's own card only says what every assistant's card says (streaming, text);
        # each assistant's card is served by the route below.
        template = AgentCard(
            name="soong-agent",
            description="A named assistant of soong-agent.",
            version="1",
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
        )
        self.handler = _Handler(
            agent_executor=RunExecutor(),
            task_store=RunTaskStore(),
            agent_card=template,
            request_context_builder=RunContextBuilder(),
        )
        self.dispatcher = JsonRpcDispatcher(self.handler, context_builder=_Builder())

    async def close(self) -> None:
        """End the tasks this process still follows (their runs go on)."""
        await self.handler.aclose()


def card_body(assistant: Assistant, base_url: str) -> dict[str, Any]:
    """The assistant's A2A agent card as JSON (served by ``routes_a2a``)."""
    return dict(agent_card_to_dict(card_for(assistant, base_url)))


async def dispatch(
    endpoint: A2AEndpoint, request: Request, gw: Gateway, caller: Caller, assistant: Assistant
) -> Response:
    """One JSON-RPC request to the assistant's endpoint, through the SDK's dispatcher."""
    request.state.soong = _Scope(gw, caller, assistant, str(request.base_url))
    return await endpoint.dispatcher.handle_requests(request)
