"""Child agents through the HTTP API: a stack of its own whose model is the OpenAI fake.

A message's SSE stream carries its workers' events (under their run ids) and ends with its own
``run_finished``; each worker's run has its own resumable stream; ``/agents`` shows the workers
with their results; a session in orchestrator mode has an orchestrator root.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Stack, start_stack, stop_stack
from tests.e2e.gateway.conftest import new_session, parse_sse, read_events
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.run_worker.harness import (
    fake_server,
    last_role,
    last_user_text,
    text_answer,
    tool_calls_turn,
)

pytestmark = pytest.mark.e2e


def _model(request: Any) -> Any:
    first = next(m for m in request["messages"] if m["role"] == "user")["content"]
    if "TASK" in str(first):  # a worker
        return text_answer(f"done: {last_user_text(request)}", pieces=3)
    if last_role(request) == "tool":
        return text_answer("Both workers are done.")
    return tool_calls_turn(
        ("call_a", "dispatch_worker", {"worker": "alpha", "task": "TASK alpha: one"}),
        ("call_b", "dispatch_worker", {"worker": "beta", "task": "TASK beta: two"}),
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, FakeOpenAIServer]]:
    home: Path = tmp_path_factory.mktemp("children-home")
    fake = fake_server(_model)
    env = {
        "SOONG_MODEL_PROVIDER": "openai",
        "SOONG_MODEL_NAME": "fake-model",
        "SOONG_MODEL_BASE_URL": fake.sdk_base_url,
        "OPENAI_API_KEY": "sk-test-not-a-real-key-000000",
    }
    running = start_stack(home, workers=2, extra_env=env)
    try:
        yield running, fake
    finally:
        stop_stack(running.process)
        fake.stop_thread()


def _client(stack: Stack) -> httpx.Client:
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    return httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=30)


def test_a_messages_stream_carries_its_workers_and_ends_with_its_own_end(
    stack: tuple[Stack, FakeOpenAIServer],
) -> None:
    running, _ = stack
    with _client(running) as c:
        sid = new_session(c)
        with c.stream(
            "POST", f"/v1/sessions/{sid}/messages", json={"text": "ask both", "stream": True}
        ) as r:
            assert r.status_code == 200, r.read()
            run_id = r.headers["x-run-id"]
            frames = [e for e in parse_sse(r.iter_lines()) if e.data is not None]
        assert frames[-1].event == "run_finished" and frames[-1].data is not None
        assert frames[-1].data["run_id"] == run_id and frames[-1].data["status"] == "completed"
        children = {f.data["run_id"] for f in frames if f.data and f.data["run_id"] != run_id}
        assert len(children) == 2, running.log()[-3000:]
        ended = [
            f.data["run_id"]
            for f in frames
            if f.event == "run_status_changed" and f.data and f.data["status"] == "completed"
        ]
        assert set(ended) == children
        texts = {
            "".join(
                f.data["text"]
                for f in frames
                if f.event == "text_delta" and f.data["run_id"] == c_id
            )
            for c_id in children
        }
        assert texts == {"done: TASK alpha: one", "done: TASK beta: two"}

        # Each worker's run: its own stream, resumable from any of its ids.
        for child in children:
            url = f"/v1/sessions/{sid}/runs/{child}/events"
            own = read_events(c, url)
            assert own[-1].event == "run_finished" and own[-1].data is not None
            assert own[-1].data["run_id"] == child and {
                e.data["run_id"] for e in own if e.data
            } == {child}
            resumed = read_events(c, url, last_event_id=own[1].id)
            assert [e.id for e in resumed] == [e.id for e in own[2:]]
            assert c.get(f"/v1/sessions/{sid}/runs/{child}").json()["status"] == "completed"

        agents = c.get(f"/v1/sessions/{sid}/agents").json()["items"]
        workers = [a for a in agents if a["agent_type"] == "sub"]
        assert len(workers) == 2
        assert all(a["result"]["status"] == "completed" for a in workers)
        assert sorted(a["metadata"]["name"] for a in workers) == ["alpha", "beta"]
        tree = c.get(f"/v1/sessions/{sid}/tree").json()["nodes"]
        assert len(tree) == 8  # message, calls, results, answer + two workers' task and answer


def test_a_session_in_orchestrator_mode_delegates(stack: tuple[Stack, FakeOpenAIServer]) -> None:
    running, fake = stack
    with _client(running) as c:
        sid = new_session(c, mode="orchestrator")
        before = len(fake.requests)
        with c.stream(
            "POST", f"/v1/sessions/{sid}/messages", json={"text": "ask both", "stream": True}
        ) as r:
            text = r.read().decode()
        assert "event: run_finished" in text
        [root] = [
            a
            for a in c.get(f"/v1/sessions/{sid}/agents").json()["items"]
            if not a["parent_agent_id"]
        ]
        assert root["agent_type"] == "orchestrator"
        # The orchestrator's request is the one with the orchestration prompt (its workers'
        # have no system prompt here).
        mine = next(
            r.json for r in fake.requests[before:] if r.json["messages"][0]["role"] == "system"
        )
        assert "orchestrator" in mine["messages"][0]["content"]
        names = {t["function"]["name"] for t in mine.get("tools", [])}
        assert "dispatch_worker" in names and "write_file" not in names
