"""The durable timeline keeps what its enum promises: a real session on the stack (the demo
model) stores every event type, and a finished run's ``GET …/events`` tells when each tool call
started and ended and how long it took (the live stream is not needed for it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agent_core.types.enums import EventType
from tests.e2e.gateway.conftest import Gw, _create_key, new_session, read_events, run_message

pytestmark = pytest.mark.e2e

# Written by the hooks a session has; this stack has none (a real run with hooks stores them:
# tests/integration/run_worker/test_hooks.py).
_HOOK_EVENTS = {EventType.HOOK_EXECUTED, EventType.STOP_HOOK_PREVENTED}


def _until(check: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _timeline(c: httpx.Client, sid: str, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    after = 0
    while True:
        page = c.get(f"/v1/sessions/{sid}/events", params={"after_seq": after, **params})
        assert page.status_code == 200, page.text
        body = page.json()
        items += body["items"]
        if body["next_after_seq"] is None:
            return items
        after = body["next_after_seq"]


def _post(c: httpx.Client, sid: str, text: str, **body: Any) -> str:
    response = c.post(f"/v1/sessions/{sid}/messages", json={"text": text, **body})
    assert response.status_code == 202, response.text
    return str(response.json()["run_id"])


def _finish(c: httpx.Client, sid: str, run_id: str) -> dict[str, Any]:
    events = read_events(c, f"/v1/sessions/{sid}/runs/{run_id}/events")
    assert events[-1].event == "run_finished" and events[-1].data is not None
    return events[-1].data


def _status(c: httpx.Client, sid: str, run_id: str) -> str:
    return str(c.get(f"/v1/sessions/{sid}/runs/{run_id}").json()["status"])


def test_a_real_session_stores_every_event_type_of_the_timeline(gw: Gw) -> None:
    key = _create_key(gw.redis_url, "timeline")  # an account of its own: its memory is its own
    with gw.client(key) as c:
        saved = c.put(
            "/v1/memory/user",
            json={"content": "- Always answer in British English.\n"},
            headers={"If-Match": "*"},
        )
        assert saved.status_code == 200, saved.text
        sid = new_session(c)
        assert c.patch(f"/v1/sessions/{sid}", json={"metadata": {"topic": "tour"}}).is_success
        files_run, _ = run_message(c, sid, "files")
        # A tool that asks first, denied: the run waits (pending), then its call fails.
        asked = _post(c, sid, "permission")
        _until(lambda: _status(c, sid, asked) == "pending", "the run never waited")
        (request,) = c.get(f"/v1/sessions/{sid}/permissions").json()["items"]
        denied = c.post(
            f"/v1/sessions/{sid}/permissions/{request['request_id']}", json={"behavior": "deny"}
        )
        assert denied.status_code == 200, denied.text
        assert _finish(c, sid, asked)["status"] == "completed"
        run_message(c, sid, "worker")
        run_message(c, sid, "tasks")
        assert _finish(c, sid, _post(c, sid, "fail"))["status"] == "failed"
        compact = c.post(f"/v1/sessions/{sid}/compact")
        assert compact.status_code == 202, compact.text
        assert _finish(c, sid, compact.json()["run_id"])["status"] == "completed"
        # A long answer cancelled, another one interrupted by a newer message.
        cancelled = _post(c, sid, "long")
        _until(lambda: _status(c, sid, cancelled) == "running", "the run never started")
        assert c.post(f"/v1/sessions/{sid}/runs/{cancelled}/cancel").is_success
        assert _finish(c, sid, cancelled)["status"] == "cancelled"
        aborted = _post(c, sid, "long")
        _until(lambda: _status(c, sid, aborted) == "running", "the run never started")
        newer = _post(c, sid, "hi", multitask_strategy="interrupt")
        assert _finish(c, sid, aborted)["status"] == "aborted"
        _finish(c, sid, newer)
        path = c.get(f"/v1/sessions/{sid}/path").json()["items"]
        # The answer that ended the first turn: a place the conversation can go on from.
        answer = next(
            n
            for n, after in zip(path, path[1:], strict=False)
            if n["role"] == "assistant" and after["role"] == "user"
        )
        switched = c.post(f"/v1/sessions/{sid}/switch_node", json={"node_id": answer["node_id"]})
        assert switched.status_code == 200, switched.text

        stored = {EventType(e["event_type"]) for e in _timeline(c, sid)}
        assert stored == set(EventType) - _HOOK_EVENTS

        # The finished "files" run: each tool call's start and end, with its duration, and the
        # file the write made (an artifact of output/).
        events = _timeline(c, sid, run_id=files_run)
        starts = {e["tool_call_id"]: e for e in events if e["event_type"] == "tool_started"}
        ends = {e["tool_call_id"]: e for e in events if e["event_type"] == "tool_completed"}
        assert len(starts) == 2 and starts.keys() == ends.keys()
        assert sorted(e["payload"]["tool"] for e in ends.values()) == ["read_file", "write_file"]
        for call_id, end in ends.items():
            payload = end["payload"]
            assert payload["started_at"] == starts[call_id]["payload"]["started_at"]
            assert payload["started_at"] <= payload["ended_at"]
            assert isinstance(payload["duration_ms"], float) and payload["duration_ms"] >= 0
        (write,) = [e for e in ends.values() if e["payload"]["tool"] == "write_file"]
        (made,) = write["payload"]["files"]
        assert (made["path"], made["area"], made["change"]) == (
            "output/demo-notes.md",
            "output",
            "created",
        )
        assert made["artifact_id"].startswith("artifact_")
