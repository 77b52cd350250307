"""A2A with the official ``a2a-sdk`` client: an assistant's card, send, stream, get, cancel —
a context is a session and a task is a run of the API."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.client.client import Client
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from tests.e2e.gateway.conftest import Gw

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def assistants(gw: Gw) -> dict[str, str]:
    """Two assistants of account A (one asks before its lookup tool); their ids by name."""
    out = {}
    with gw.client() as c:
        for name, body in (
            ("a2a-helper", {"description": "Answers with the demo model."}),
            ("a2a-asker", {"config": {"tool_policy": {"ask": ["lookup"]}}}),
        ):
            made = c.post("/v1/assistants", json={"name": name, **body})
            assert made.status_code == 201, made.text
            out[name] = made.json()["assistant_id"]
    return out


def _http(gw: Gw, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key or gw.stack.api_key}"}
    return httpx.AsyncClient(headers=headers, timeout=30)


@asynccontextmanager
async def _client(gw: Gw, name: str, *, streaming: bool) -> AsyncIterator[tuple[Client, AgentCard]]:
    async with _http(gw) as http:
        card = await A2ACardResolver(http, f"{gw.stack.gateway_url}/a2a/{name}").get_agent_card()
        client = await create_client(
            card, client_config=ClientConfig(httpx_client=http, streaming=streaming)
        )
        yield client, card


def _message(text: str, context_id: str = "") -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=[Part(text=text)],
        context_id=context_id,
    )
    return SendMessageRequest(message=message)


async def test_card_send_get_and_continue(gw: Gw, assistants: dict[str, str]) -> None:
    async with _client(gw, "a2a-helper", streaming=False) as (client, card):
        assert card.name == "a2a-helper" and card.description == "Answers with the demo model."
        assert card.capabilities.streaming
        assert card.supported_interfaces[0].url.endswith(f"/a2a/{assistants['a2a-helper']}")
        [first] = [r async for r in client.send_message(_message("look this up"))]
        task = first.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        answer = {a.name: a for a in task.artifacts}["answer"]
        assert "scripted demo model" in answer.parts[0].text
        # The task is the run and the context the session, as the API shows them.
        with gw.client() as c:
            run = c.get(f"/v1/sessions/{task.context_id}/runs/{task.id}").json()
            assert run["status"] == "completed"
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert (
            got.status.state == TaskState.TASK_STATE_COMPLETED and got.context_id == task.context_id
        )
        # The next message of the conversation: a new task (run) in the same context (session).
        [second] = [r async for r in client.send_message(_message("files", task.context_id))]
        assert second.task.context_id == task.context_id and second.task.id != task.id
        files = [a for a in second.task.artifacts if a.name != "answer"]
        assert files and files[0].parts[0].url.startswith(gw.stack.gateway_url)
        with gw.client() as c:
            assert c.get(files[0].parts[0].url).status_code == 200
            runs = c.get(f"/v1/sessions/{task.context_id}/runs").json()["items"]
            assert [r["run_id"] for r in runs] == [task.id, second.task.id]


async def test_stream_then_cancel(gw: Gw, assistants: dict[str, str]) -> None:
    async with _client(gw, "a2a-helper", streaming=True) as (client, _):
        events: list[StreamResponse] = [e async for e in client.send_message(_message("hi"))]
        kinds = [e.WhichOneof("payload") for e in events]
        assert "artifact_update" in kinds, kinds
        streamed = "".join(
            p.text
            for e in events
            if e.HasField("artifact_update") and e.artifact_update.artifact.name == "answer"
            for p in e.artifact_update.artifact.parts
        )
        assert "scripted demo model" in streamed
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    async with _client(gw, "a2a-asker", streaming=True) as (client, _):
        stream = client.send_message(_message("ask first"))
        task_id = ""
        async for event in stream:
            update = event.status_update if event.HasField("status_update") else None
            task_id = task_id or event.task.id or (update.task_id if update else "")
            said = "".join(p.text for p in update.status.message.parts) if update else ""
            if "waiting for permission" in said:
                break
        await stream.aclose()
        assert task_id
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        got = await client.get_task(GetTaskRequest(id=task_id))
        assert got.status.state == TaskState.TASK_STATE_CANCELED
        with gw.client() as c:
            run = c.get(f"/v1/sessions/{got.context_id}/runs/{task_id}").json()
            assert run["status"] == "cancelled", run


async def test_errors_are_typed_and_scoped(gw: Gw, assistants: dict[str, str]) -> None:
    async with _client(gw, "a2a-helper", streaming=False) as (client, _):
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="run_" + "0" * 16))
        with pytest.raises(InvalidParamsError) as caught:
            [_ async for _ in client.send_message(_message("hi", "sess_" + "0" * 16))]
        assert "unknown contextId" in str(caught.value) and "Traceback" not in str(caught.value)
        with pytest.raises(InvalidParamsError, match="only text parts"):
            request = _message("hi")
            request.message.parts.append(Part(url="https://example.com/x"))
            [_ async for _ in client.send_message(request)]
    async with _http(gw) as http:
        url = f"{gw.stack.gateway_url}/a2a/a2a-helper"
        for body in (
            {"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod", "params": {}},
            {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": 7}},
        ):
            answer = await http.post(url, json=body, headers={"A2A-Version": "1.0"})
            error = answer.json()["error"]
            assert error["code"] in (-32601, -32602) and "Traceback" not in answer.text, answer.text
    # Another account: no card, no endpoint — the API's 404, alike for a missing assistant.
    async with _http(gw, gw.key_b) as bob:
        for path in (
            "/a2a/a2a-helper/.well-known/agent-card.json",
            "/a2a/nobody/.well-known/agent-card.json",
        ):
            answer = await bob.get(gw.stack.gateway_url + path)
            assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
