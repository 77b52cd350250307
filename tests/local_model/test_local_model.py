"""The stack against a real small local model (``make test-local-model``): SmolLM2-135M-Instruct
served by llama-cpp-python with a 2,048-token window, configured as docs/providers.md says.

What a user of such a server meets: answers stream; a forced tool call does not break the
session's later messages (the assistant's tool-call message is one the server accepts); a long
conversation keeps answering by compacting within the window; an overflow the server reports
only as an empty stream ends the run saying why; usage the server never reports is marked
estimated. A 135M model's words are not judged, only that they come and how runs end.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import Stack
from tests.e2e.gateway.conftest import SseEvent, new_session, read_events
from tests.local_model.conftest import WINDOW

# About 55 tokens of plain prose.
_PARAGRAPH = (
    "Our team keeps a small garden behind the office. Every spring we plant tomatoes, beans, "
    "basil and a row of sunflowers along the fence; in summer someone waters it every morning "
    "before the first meeting, and in autumn we share what grew. "
)


def _client(stack: Stack) -> httpx.Client:
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    # A small model on two cores answers in seconds; a compaction is a model call of its own.
    return httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=300)


def _run(
    client: httpx.Client, session_id: str, text: str, **body: Any
) -> tuple[dict[str, Any], list[SseEvent]]:
    """Post a message, read its run's stream to the end: the ``run_finished`` data and events."""
    posted = client.post(f"/v1/sessions/{session_id}/messages", json={"text": text, **body})
    assert posted.status_code == 202, posted.text
    run_id = posted.json()["run_id"]
    events = read_events(client, f"/v1/sessions/{session_id}/runs/{run_id}/events")
    assert events and events[-1].event == "run_finished", [e.event for e in events]
    finished = events[-1].data
    assert finished is not None
    return finished, events


def _answer(events: list[SseEvent]) -> str:
    return "".join(
        str(e.data["text"]) for e in events if e.event == "text_delta" and e.data is not None
    )


def _completed(finished: dict[str, Any]) -> None:
    assert (finished["status"], finished["end_reason"]) == ("completed", "completed"), finished


def test_a_chat_streams_an_answer_and_marks_its_usage_estimated(local_stack: Stack) -> None:
    with _client(local_stack) as client:
        session = new_session(client)
        finished, events = _run(client, session, "Hello! Name one colour of the sky.")
    _completed(finished)
    deltas = [e for e in events if e.event == "text_delta"]
    assert len(deltas) > 1 and _answer(events).strip(), "the answer did not stream"
    # llama-cpp-python's server sends no usage with a stream: the runtime's estimate, marked.
    usage = finished["usage"]
    assert usage["estimated"] is True
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0


def test_a_forced_tool_call_then_more_messages_in_the_same_session(local_stack: Stack) -> None:
    with _client(local_stack) as client:
        session = new_session(client)
        finished, events = _run(
            client,
            session,
            "What files are there?",
            agent_config={"tool_choice": {"name": "list_dir"}},
        )
        _completed(finished)
        started = [e.data for e in events if e.event == "tool_started" and e.data is not None]
        assert [s["name"] for s in started][:1] == ["list_dir"], started
        results = [e.data for e in events if e.event == "tool_result" and e.data is not None]
        assert results, "the forced call got no result"
        # The history now holds an assistant message with a tool call: the server must take it.
        for text in ("Thanks. What did you find?", "Say hello in French."):
            finished, events = _run(client, session, text)
            _completed(finished)
            assert _answer(events).strip()


def test_ten_long_messages_keep_answering_within_the_window(local_stack: Stack) -> None:
    with _client(local_stack) as client:
        session = new_session(client)
        for i in range(10):
            text = f"Note {i + 1} about the garden. " + _PARAGRAPH * 4 + "Reply with one line."
            finished, events = _run(client, session, text)
            _completed(finished)
            assert _answer(events).strip(), f"message {i + 1} got no answer"
        path = client.get(f"/v1/sessions/{session}/path").json()["items"]
    compactions = [n for n in path if n["node_type"] == "compaction"]
    assert compactions, "ten messages of the window's size in all, and nothing was compacted"


def test_an_overflow_while_streaming_ends_the_run_saying_why(local_stack: Stack) -> None:
    # The session claims a window four times the server's: the runtime sends a prompt (~2,700
    # tokens) the server cannot hold, which llama-cpp-python answers while streaming with an empty
    # 200 stream. (A worker that learned the real window in an earlier run refuses it itself.)
    with _client(local_stack) as client:
        session = new_session(client, agent_config={"context_window": WINDOW * 4})
        finished, _ = _run(client, session, "Summarise this. " + _PARAGRAPH * 50)
    assert finished["status"] == "failed", finished
    assert finished["end_reason"] == "prompt_too_long", finished["error"]
    # The reason is the server's own (its window named), learned by asking once more without
    # streaming — not an "incomplete response" retried until it gave up.
    error = finished["error"]
    assert error is not None and error["code"] == "context_length_exceeded", error
    assert str(WINDOW) in error["message"], error


@pytest.fixture(autouse=True)
def _server_alive(local_stack: Stack) -> None:
    """A test that found the stack down says so rather than timing out."""
    assert local_stack.process.poll() is None, local_stack.log()[-4000:]
