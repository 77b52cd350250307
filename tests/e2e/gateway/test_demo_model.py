"""The demo model (``make demo``) shows every kind of step without a key: a file written and read,
code run, a task list, a worker dispatched, a permission asked, a long answer streamed word by
word, and a failure on request — each through the real stack, as a new user would see it."""

from __future__ import annotations

import json

import pytest

from tests.e2e.gateway.conftest import Gw, SseEvent, new_session, read_events, run_message

pytestmark = pytest.mark.e2e


def _tools(events: list[SseEvent]) -> list[str]:
    return [e.data["name"] for e in events if e.event == "tool_started" and e.data]


def _finished(events: list[SseEvent]) -> dict[str, object]:
    assert events[-1].event == "run_finished" and events[-1].data is not None
    return events[-1].data


def test_help_lists_the_words(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        run_message(c, sid, "help")
        # The stored answer: a reader that comes after a run's stream was trimmed (a 14 ms run on
        # a loaded machine) reads the durable timeline, which keeps nodes, not text deltas.
        nodes = c.get(f"/v1/sessions/{sid}/path").json()["items"]
        text = json.dumps([n["content"] for n in nodes if n["role"] == "assistant"])
        for word in ("files", "code", "tasks", "worker", "permission", "long", "fail"):
            assert f"- {word}:" in text, word


def test_files_code_tasks_and_a_worker(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        run_id, events = run_message(c, sid, "show me files")
        assert _tools(events) == ["write_file", "read_file"]
        assert _finished(events)["status"] == "completed"
        assert c.get(f"/v1/sessions/{sid}/files/output/demo-notes.md").text.startswith("# Demo")

        _, events = run_message(c, sid, "run some code")
        assert _tools(events) == ["run_python"]
        squares = c.get(f"/v1/sessions/{sid}/files/output/squares.csv").text.splitlines()
        assert squares[0] == "n,square" and squares[-1] == "10,100"

        _, events = run_message(c, sid, "tasks please")
        assert _tools(events) == ["task_create_list", "task_add", "task_add", "task_list"]
        tasks = c.get(f"/v1/sessions/{sid}/tasks/demo").json()["dag"]["tasks"].values()
        assert sorted(t["title"] for t in tasks) == [
            "Collect the data",
            "Write the report",
        ]

        _, events = run_message(c, sid, "a worker")
        assert _tools(events)[0] == "dispatch_worker"
        agents = c.get(f"/v1/sessions/{sid}/agents").json()["items"]
        workers = [a for a in agents if a["agent_type"] == "sub"]
        assert len(workers) == 1 and workers[0]["result"] is not None, agents


def test_a_permission_is_asked_and_the_run_waits_for_it(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        posted = c.post(f"/v1/sessions/{sid}/messages", json={"text": "permission"})
        run_id = posted.json()["run_id"]
        url = f"/v1/sessions/{sid}/runs/{run_id}/events"
        head: list[SseEvent] = []
        while not head or head[-1].event != "permission_requested":
            head += read_events(c, url, stop_after=1, last_event_id=head[-1].id if head else None)
        request = head[-1].data
        assert request is not None and request["request"]["tool_call"]["name"] == "publish_report"
        decided = c.post(
            f"/v1/sessions/{sid}/permissions/{request['request']['request_id']}",
            json={"behavior": "allow"},
        )
        assert decided.status_code == 200, decided.text
        rest = read_events(c, url, last_event_id=head[-1].id)
        results = [e.data for e in rest if e.event == "tool_result" and e.data]
        assert results and not results[0]["is_error"]
        assert _finished(rest)["status"] == "completed"


def test_a_long_answer_streams_word_by_word(gw: Gw) -> None:
    with gw.client() as c:
        _, events = run_message(c, new_session(c), "something long")
        deltas = [e.data["text"] for e in events if e.event == "text_delta" and e.data]
    # The model streams a word a delta; the worker merges deltas that queue up behind a slow
    # write (runqueue/events.py), so a loaded machine sees fewer, longer ones. Either way the
    # answer arrives in pieces, and no piece ends inside a word.
    assert len(deltas) > 1 and len("".join(deltas).split()) > 200
    for before, after in zip(deltas, deltas[1:], strict=False):
        assert not (before[-1].isalnum() and after[0].isalnum()), (before, after)


def test_a_failure_on_request_ends_the_run_with_a_clear_error(gw: Gw) -> None:
    with gw.client() as c:
        _, events = run_message(c, new_session(c), "fail")
        finished = _finished(events)
        assert finished["status"] == "failed"
        error = finished["error"]
        assert isinstance(error, dict) and error["code"] == "demo_failure"
        assert "asked to fail" in str(error["message"])


def test_cancel_reaches_a_long_answer(gw: Gw) -> None:
    """What the chat's /cancel does mid-answer: the run ends cancelled, the stream says so."""
    with gw.client() as c:
        sid = new_session(c)
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "long"}).json()["run_id"]
        url = f"/v1/sessions/{sid}/runs/{run_id}/events"
        head: list[SseEvent] = []
        while not any(e.event == "text_delta" for e in head):  # the answer is streaming
            head += read_events(c, url, stop_after=1, last_event_id=head[-1].id if head else None)
        cancelled = c.post(f"/v1/sessions/{sid}/runs/{run_id}/cancel", params={"wait": True})
        assert cancelled.json()["status"] == "cancelled", cancelled.text
        rest = read_events(c, url, last_event_id=head[-1].id)
        assert _finished(rest)["status"] == "cancelled"
