"""The account's named assistants as MCP tools, at ``/mcp`` (Streamable HTTP, the official SDK).

Each active assistant of the caller's account is one tool: its name, its description, and an
input of ``message`` (required) and ``session_id`` (optional: continue a session an earlier call
of the same assistant answered with). A call is one run (see :mod:`services.gateway.agent_calls`);
while it runs, each read of its stream is one ``notifications/progress`` (the answer's new text,
or the step it took) when the client sent a ``progressToken``; the result is the answer as text,
a resource link per output file (the API's download URL, which takes the same key) and, as
structured content, the session and run ids. A run that failed or was cancelled is a result with
``isError``; a bad call (an unknown tool, a missing message, another account's session) is a
JSON-RPC error. A client that cancels its request cancels the run.

Stateless mode: every POST stands alone (no MCP session is kept in this process), so any gateway
instance serves any request, as for the rest of the API. Auth is the API's: the Bearer key is
checked (and rate-limited) before the SDK sees the request; a refusal is a JSON-RPC error body
with the API's status (401 with ``WWW-Authenticate``, 429 with ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Final

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from agent_core.bus.contracts.assistants import ListAssistants
from agent_core.errors import AgentCoreError, redact
from services.gateway import agent_calls
from services.gateway.agent_calls import Call, Outcome
from services.gateway.auth import Caller
from services.gateway.errors import ApiError
from services.gateway.state import Gateway, fetch_optional

__all__ = ["McpEndpoint", "tool_of", "tool_result"]

# JSON-RPC's own codes, and one of the server range for "not allowed now" (auth, limits).
_INVALID_PARAMS: Final = -32602
_SERVER_ERROR: Final = -32000

INPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "message": {
            "type": "string",
            "minLength": 1,
            "maxLength": agent_calls.MAX_MESSAGE_CHARS,
            "description": "What to ask the assistant.",
        },
        "session_id": {
            "type": "string",
            "maxLength": 64,
            "description": "Continue this session (the session_id of an earlier call's result) "
            "instead of starting a new one.",
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "session_id": {"type": "string"},
        "run_id": {"type": "string"},
        "status": {"type": "string"},
    },
    "required": ["session_id", "run_id", "status"],
}


def tool_of(name: str, description: str) -> types.Tool:
    """The MCP tool of an assistant (pure)."""
    return types.Tool(
        name=name,
        description=description or f"The assistant {name} of this soong-agent account.",
        input_schema=INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
    )


def tool_result(call: Call, outcome: Outcome) -> types.CallToolResult:
    """The result of a finished call (pure): the answer, a link per file, the ids."""
    content: list[types.ContentBlock] = []
    text = outcome.text
    if not outcome.ok:
        why = outcome.error_message or f"the run ended {outcome.status.value}"
        text = f"{text}\n\n[{outcome.status.value}] {why}".strip()
    content.append(types.TextContent(text=text))
    content += [
        types.ResourceLink(
            uri=f.url, name=f.name, mime_type=f.mime_type, size=f.size_bytes, title=f.name
        )
        for f in outcome.files
    ]
    return types.CallToolResult(
        content=content,
        structured_content={
            "session_id": call.session_id,
            "run_id": call.run_id,
            "status": outcome.status.value,
        },
        is_error=not outcome.ok,
    )


def _arguments(arguments: dict[str, Any] | None) -> tuple[str, str | None]:
    """The message and session id of a call's arguments, or INVALID_PARAMS naming the field."""
    args = arguments or {}
    message = args.get("message")
    if not isinstance(message, str) or not message.strip():
        raise MCPError(
            _INVALID_PARAMS, "invalid arguments: message (a non-empty string) is required"
        )
    session_id = args.get("session_id")
    if session_id is not None and not isinstance(session_id, str):
        raise MCPError(_INVALID_PARAMS, "invalid arguments: session_id must be a string")
    unknown = sorted(set(args) - {"message", "session_id"})
    if unknown:
        raise MCPError(_INVALID_PARAMS, f"invalid arguments: unknown {', '.join(unknown)[:200]}")
    return message, session_id


def _mcp_error(exc: ApiError | AgentCoreError) -> MCPError:
    """A JSON-RPC error for a refusal of the API (its code in ``data``, message redacted)."""
    if isinstance(exc, ApiError):
        status, code, message = exc.status, exc.code, exc.message
    else:
        payload = exc.to_payload()
        status, code, message = 500, payload.code, payload.message
    kind = _INVALID_PARAMS if status in (400, 404, 409, 422) else _SERVER_ERROR
    if status == 404:
        message = "unknown tool or session: " + message
    return MCPError(kind, redact(message), {"code": code, "status": status})


class McpEndpoint:
    """The ASGI app at ``/mcp``: auth, then the SDK's Streamable HTTP transport (stateless).

    The SDK's session manager runs in a task of its own, started by the first request (the
    gateway's server runs without ASGI lifespan) and stopped by :meth:`close`.
    """

    def __init__(self, gw: Gateway) -> None:
        self._gw = gw
        server: Server[Any] = Server(
            "soong-agent",
            version="0.1.0",
            instructions="Each tool is one of your account's named assistants: call it with a "
            "message; pass the session_id of its answer to continue that conversation.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self._manager = StreamableHTTPSessionManager(server, stateless=True)
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            await self._gw.auth(request)
        except ApiError as exc:
            body = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": _SERVER_ERROR,
                    "message": exc.message,
                    "data": {"code": exc.code},
                },
            }
            headers = [(b"content-type", b"application/json")]
            headers += [(k.lower().encode(), v.encode()) for k, v in (exc.headers or {}).items()]
            await send({"type": "http.response.start", "status": exc.status, "headers": headers})
            await send({"type": "http.response.body", "body": json.dumps(body).encode()})
            return
        await self._started()
        await self._manager.handle_request(scope, receive, send)

    async def _started(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._serve(), name="mcp-sessions")
        await self._ready.wait()

    async def _serve(self) -> None:
        async with self._manager.run():
            self._ready.set()
            await self._stop.wait()

    async def close(self) -> None:
        """Stop the SDK's session manager (requests still open end)."""
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task

    # -- handlers ---------------------------------------------------------------------------------

    @staticmethod
    def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
        request = ctx.request
        caller = getattr(getattr(request, "state", None), "caller", None)
        if not isinstance(caller, Caller):  # every request passed auth first: never here
            raise MCPError(_SERVER_ERROR, "not authenticated")
        return caller

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        caller = self._caller(ctx)
        query = ListAssistants(account_id=caller.account_id, include_archived=False)
        try:
            assistants = await fetch_optional(self._gw, query) or []
        except (ApiError, AgentCoreError) as exc:
            raise _mcp_error(exc) from exc
        return types.ListToolsResult(tools=[tool_of(a.name, a.description) for a in assistants])

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = self._caller(ctx)
        message, session_id = _arguments(params.arguments)
        gw = self._gw
        try:
            assistant = await agent_calls.find_assistant(gw, caller, params.name)
            call = await agent_calls.start(gw, caller, assistant, message, session_id)
        except (ApiError, AgentCoreError) as exc:
            raise _mcp_error(exc) from exc
        try:
            outcome = await self._watch(ctx, caller, call)
        except asyncio.CancelledError:  # the client cancelled the request, or went away
            await agent_calls.cancel_quietly(gw, call)
            raise
        except (ApiError, AgentCoreError) as exc:
            raise _mcp_error(exc) from exc
        return tool_result(call, outcome)

    async def _watch(
        self, ctx: ServerRequestContext[Any, Any], caller: Caller, call: Call
    ) -> Outcome:
        """Follow the run, one progress notification per read; its outcome."""
        gw = self._gw
        count = 0
        finished: dict[str, Any] = {}
        await gw.slots.acquire(caller.key_id)
        try:
            async for step in agent_calls.follow(gw, caller, call):
                # A no-op unless the client sent a progressToken. The batch that ends the run
                # may carry the answer's last text too (all of it, and the steps before it,
                # when the run outpaced this reader): the steps are told first, one count
                # into the batch (a batch with both holds two events at least), then the text.
                steps = "; ".join(step.notes)
                if steps and step.text:
                    await ctx.session.report_progress(float(count + 1), None, steps)
                count += step.events
                note = step.text or steps
                if note or step.restart:
                    await ctx.session.report_progress(float(count), None, note)
                if step.finished is not None:
                    finished = step.finished
                    break
        finally:
            await gw.slots.release(caller.key_id)
        base = str(ctx.request.base_url) if isinstance(ctx.request, Request) else ""
        return await agent_calls.outcome(gw, caller, call, finished, base)
