"""The OpenAI-compatible endpoint: ``POST /v1/openai/chat/completions`` and ``/v1/openai/responses``.

Code written against the OpenAI API (the ``openai`` SDK with ``base_url`` set to the gateway's
``/v1/openai``, and the same API key) talks to a named assistant: ``model`` is the assistant's
name or id. A call is a normal run of the assistant — its session is made by the sessions route
(:func:`~services.gateway.routes_sessions.create_session`) and its message posted by the messages
route (:func:`~services.gateway.routes_messages.post_message`, ``stream=true``), so the tree,
permissions, hooks, limits and stream slots are the same as through our own API. What comes back
is that run's event stream, translated (:mod:`services.gateway.openai_compat`): as OpenAI's
events for ``stream: true``, else collected into one answer. Each call, streamed or not, holds
one of the key's stream slots while it runs.

A conversation is a session: the answer names it in ``X-Soong-Session-Id`` (and the run and its
user node in ``X-Run-Id`` / ``X-Node-Id``); Chat Completions continue one with that request
header, the Responses API with ``previous_response_id`` (a response id names its session and run:
the next message goes after that run's answer). Errors answer in OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}`` — the gateway's own errors (auth, limits,
validation, storage) converted by the route class below, so that the openai SDK raises the
error class it would for OpenAI.

Not in the gateway's OpenAPI document: these routes' contract is OpenAI's API, which the openai
SDK implements (our SDK, generated against our document, does not call them).
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.types import Message, Receive, Scope, Send

from agent_core.types.api import AssistantPin, CreateSessionRequest, PostMessageRequest
from agent_core.types.protocol import TextBlock
from services.gateway.auth import Caller
from services.gateway.errors import ApiError
from services.gateway.openai_compat import (
    ChatCompletionRequest,
    ChatStream,
    Finished,
    MappingError,
    ResponsesRequest,
    ResponsesStream,
    RunText,
    chat_completion,
    chat_turn,
    error_body,
    openai_error_of,
    parse_response_id,
    response_id,
    response_object,
    responses_turn,
)
from services.gateway.routes_assistants import get_assistant
from services.gateway.routes_messages import post_message
from services.gateway.routes_sessions import create_session
from services.gateway.sse import SseResponse
from services.gateway.state import CallerDep, Gateway, GatewayDep, get_run, get_session

__all__ = ["SESSION_HEADER", "router"]

SESSION_HEADER = "X-Soong-Session-Id"


class OpenAiError(Exception):
    """An error this module answers in OpenAI's shape as it is."""

    def __init__(
        self, status: int, code: str, message: str, *, param: str | None = None, kind: str = ""
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param
        self.kind = kind or ("server_error" if status >= 500 else "invalid_request_error")

    def response(self) -> JSONResponse:
        body = error_body(self.message, type=self.kind, code=self.code, param=self.param)
        return JSONResponse(body, status_code=self.status)


async def _converted(request: Request, exc: Exception) -> Response:
    """The gateway's own answer to ``exc`` (its handlers: status, redaction, logging,
    headers such as ``Retry-After``), re-shaped as OpenAI's error."""
    if isinstance(exc, OpenAiError):
        return exc.response()
    if isinstance(exc, MappingError):
        return OpenAiError(400, "invalid_value", exc.message, param=exc.param).response()
    if isinstance(exc, ValidationError):  # a value of the body refused further in
        return OpenAiError(400, "invalid_value", "invalid request body").response()
    handler: Callable[[Request, Exception], Any] | None = None
    for cls in type(exc).__mro__:
        handler = request.app.exception_handlers.get(cls)
        if handler is not None:
            break
    if handler is None:  # never: the gateway has a handler for Exception
        raise exc
    answer = handler(request, exc)
    ours: Response = await answer if inspect.isawaitable(answer) else answer
    status, body = openai_error_of(ours.status_code, json.loads(bytes(ours.body)))
    headers = {
        k: v for k, v in ours.headers.items() if k.lower() not in ("content-length", "content-type")
    }
    return JSONResponse(body, status_code=status, headers=headers)


class _OpenAiRoute(APIRoute):
    """A route whose every error — from auth, validation, the route — is OpenAI-shaped."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                return await _converted(request, exc)

        return handle


router = APIRouter(
    prefix="/v1/openai", tags=["openai"], include_in_schema=False, route_class=_OpenAiRoute
)

_SessionHeader = Annotated[
    str | None, Header(alias=SESSION_HEADER, max_length=80, description="continue this session")
]


def _model_not_found() -> OpenAiError:
    # The model is not echoed: a name of another account's assistant must answer like any other.
    return OpenAiError(
        404,
        "model_not_found",
        "the model does not exist: name one of your assistants (GET /v1/assistants)",
        param="model",
    )


async def _new_session(gw: Gateway, caller: Caller, model: str) -> str:
    """A new session made from the assistant ``model`` names (404 ``model_not_found``)."""
    try:
        session = await create_session(
            CreateSessionRequest(assistant=model), gw, caller, Response()
        )
    except ApiError as exc:
        if exc.status == 404 or exc.code == "assistant_archived":
            raise _model_not_found() from exc
        raise
    return session.session_id


async def _check_session(gw: Gateway, caller: Caller, session_id: str, model: str) -> None:
    """404 unless the caller has the session; 400 unless it was made from ``model``'s assistant
    (404 ``model_not_found`` when ``model`` names none of the caller's)."""
    session = await get_session(gw, caller, session_id)
    pin = AssistantPin.of(session.metadata)
    if pin is not None and pin.names(model):
        return
    try:
        await get_assistant(gw, caller, model)
    except ApiError as exc:
        if exc.status == 404:
            raise _model_not_found() from exc
        raise
    raise OpenAiError(
        400,
        "model_session_mismatch",
        "the session was not made from the assistant `model` names",
        param="model",
    )


async def _post(
    gw: Gateway, caller: Caller, session_id: str, texts: list[str], parent_node_id: str | None
) -> SseResponse:
    """Post the turn through the messages route (``stream=true``): its run's event stream."""
    body = PostMessageRequest(
        content=[TextBlock(text=t) for t in texts], parent_node_id=parent_node_id, stream=True
    )
    response = await post_message(session_id, body, gw, caller)
    assert isinstance(response, SseResponse)
    response.headers[SESSION_HEADER] = session_id
    return response


Encoder = ChatStream | ResponsesStream


async def _translated(
    source: AsyncIterable[str | bytes | memoryview], reader: RunText, encoder: Encoder
) -> AsyncIterator[bytes]:
    """Our SSE bytes of a run as the encoder's events; keep-alive comments pass through."""
    yield encoder.start()
    async for chunk in source:
        out = []
        for fact in reader.feed(chunk.encode() if isinstance(chunk, str) else bytes(chunk)):
            if fact is None:
                out.append(b": keep-alive\n\n")
            elif isinstance(fact, str):
                out.append(encoder.text(fact))
            else:
                out.append(encoder.end(fact))
        if out:
            yield b"".join(out)
    if reader.finished is None:
        yield encoder.end(None)


def _streamed(stream: SseResponse, encoder: Encoder) -> SseResponse:
    """The run's stream answered as the encoder's events (the slot is released as before)."""
    reader = RunText(stream.headers["X-Run-Id"])
    stream.body_iterator = _translated(stream.body_iterator, reader, encoder)
    return stream


Build = Callable[[str, Finished | None], tuple[int, dict[str, Any]]]


class _Collected(Response):
    """A run's stream read to its end and answered as one JSON body (``build``): the stream
    response runs as it would for a client (its slot, its end), its bytes read here."""

    def __init__(self, stream: SseResponse, build: Build) -> None:
        super().__init__()
        self._stream, self._build = stream, build
        keep = ("x-run-id", "x-node-id", SESSION_HEADER.lower())
        self._extra = {k: v for k, v in stream.headers.items() if k.lower() in keep}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reader = RunText(self._extra["x-run-id"])
        pieces: list[str] = []

        async def take(message: Message) -> None:
            if message["type"] == "http.response.body":
                pieces.extend(f for f in reader.feed(message.get("body", b"")) if type(f) is str)

        await self._stream(scope, receive, take)
        status, body = self._build("".join(pieces), reader.finished)
        await JSONResponse(body, status_code=status, headers=self._extra)(scope, receive, send)


def _collected(stream: SseResponse, build: Build) -> Response:
    return _Collected(stream, build)


@router.post("/chat/completions")
async def chat_completions(
    body: ChatCompletionRequest,
    gw: GatewayDep,
    caller: CallerDep,
    session_header: _SessionHeader = None,
) -> Response:
    """OpenAI's Chat Completions, answered by the assistant ``model`` names."""
    created = int(time.time())
    texts = chat_turn(body.messages, continuing=session_header is not None)
    if session_header is not None:
        await _check_session(gw, caller, session_header, body.model)
        session_id = session_header
    else:
        session_id = await _new_session(gw, caller, body.model)
    stream = await _post(gw, caller, session_id, texts, None)
    completion_id = "chatcmpl-" + stream.headers["X-Run-Id"].removeprefix("run_")
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        encoder = ChatStream(
            completion_id=completion_id,
            model=body.model,
            created=created,
            include_usage=include_usage,
        )
        return _streamed(stream, encoder)

    def build(text: str, finished: Finished | None) -> tuple[int, dict[str, Any]]:
        return chat_completion(
            completion_id=completion_id,
            model=body.model,
            created=created,
            text=text,
            finished=finished,
        )

    return _collected(stream, build)


async def _previous(gw: Gateway, caller: Caller, previous: str, model: str) -> tuple[str, str]:
    """The session and the node a ``previous_response_id`` continues from (its run's last
    node); 404 ``previous_response_not_found`` for anything not the caller's."""
    ids = parse_response_id(previous)
    missing = OpenAiError(
        404,
        "previous_response_not_found",
        "no such previous response",
        param="previous_response_id",
    )
    if ids is None:
        raise missing
    session_id, run_id = ids
    try:
        run = await get_run(gw, caller, session_id, run_id)
    except ApiError as exc:
        if exc.status == 404:
            raise missing from exc
        raise
    if not run.is_terminal:
        raise OpenAiError(
            409,
            "previous_response_in_progress",
            "the previous response has not finished yet",
            param="previous_response_id",
        )
    await _check_session(gw, caller, session_id, model)
    node = run.last_node_id or run.start_node_id
    assert node is not None  # a terminal run has placed its message
    return session_id, node


@router.post("/responses")
async def responses(
    body: ResponsesRequest,
    gw: GatewayDep,
    caller: CallerDep,
    session_header: _SessionHeader = None,
) -> Response:
    """OpenAI's Responses API, answered by the assistant ``model`` names."""
    created = int(time.time())
    texts = responses_turn(body)
    parent: str | None = None
    if body.previous_response_id is not None:
        session_id, parent = await _previous(gw, caller, body.previous_response_id, body.model)
        if session_header is not None and session_header != session_id:
            raise OpenAiError(
                400,
                "session_mismatch",
                f"{SESSION_HEADER} names another session than previous_response_id",
                param="previous_response_id",
            )
    elif session_header is not None:
        await _check_session(gw, caller, session_header, body.model)
        session_id = session_header
    else:
        session_id = await _new_session(gw, caller, body.model)
    stream = await _post(gw, caller, session_id, texts, parent)
    rid = response_id(session_id, stream.headers["X-Run-Id"])
    if body.stream:
        return _streamed(
            stream, ResponsesStream(rid=rid, model=body.model, created_at=created, body=body)
        )

    def build(text: str, finished: Finished | None) -> tuple[int, dict[str, Any]]:
        if finished is None:
            return 503, error_body(
                "the run's event stream ended before the run did; it goes on in its session",
                type="server_error",
                code="stream_interrupted",
            )
        obj = response_object(
            rid=rid,
            model=body.model,
            created_at=created,
            text=text or None,
            finished=finished,
            body=body,
        )
        return 200, obj

    return _collected(stream, build)
