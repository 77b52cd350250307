"""The SDK's public surface is pinned, its models are the server's own, and the blocking client
is the async one run on a portal thread."""

from __future__ import annotations

import json

import httpx

import soong_agent
from agent_core.types import api, runtime
from soong_agent import types

PUBLIC = {
    "APIError", "Assistants", "AsyncAssistants", "AsyncClient", "AsyncMemory", "AsyncRun", "AsyncSession", "AuthenticationError",
    "BadRequestError", "Client", "ConflictError", "FieldError", "LocalClient", "LocalStackError", "Memory",
    "NotFoundError", "PayloadTooLargeError", "PermissionDeniedError", "PreconditionFailedError",
    "PreconditionRequiredError", "ProtocolError", "RateLimitedError", "Run", "RunIterator",
    "RunStream", "ServerError", "ServiceUnavailableError", "Session", "SoongError",
    "StreamEvent", "StreamLostError", "ToolUse", "TransportError", "ValidationError", "local",
}  # fmt: skip


def test_public_names_are_pinned() -> None:
    assert set(soong_agent.__all__) == PUBLIC
    assert all(hasattr(soong_agent, name) for name in PUBLIC)


def test_models_are_the_servers_classes_not_copies() -> None:
    assert types.RunFinished is runtime.RunFinished
    assert types.SessionState is runtime.SessionState
    assert types.Tree is api.Tree
    assert types.RuntimeEvent is runtime.RuntimeEvent


def test_the_blocking_client_streams_a_run() -> None:
    sid = "sess_20260101_120000_0123456789abcdef"
    rid = "run_0123456789abcdef"
    common = {"run_id": rid, "session_id": sid}
    events = [
        runtime.RunTextDelta(turn=1, text="4", **common),
        runtime.RunFinished(status="completed", **common),
    ]
    body = b"".join(
        f"id: {i}-0\nevent: {e.type}\ndata: {e.model_dump_json()}\n\n".encode()
        for i, e in enumerate(events)
    )

    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content) == {"stream": True, "text": "2+2?"}
        return httpx.Response(200, content=body, headers={"x-run-id": rid})

    with soong_agent.Client("http://gw", "sa_live_x", transport=httpx.MockTransport(handler)) as c:
        stream = c.session(sid).send("2+2?")
        assert [e.type for e in stream] == ["text_delta", "run_finished"]
        assert stream.text == "4" and stream.run_id == rid
        assert stream.finished is not None and stream.finished.status == "completed"
