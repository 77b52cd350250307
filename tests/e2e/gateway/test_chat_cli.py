"""``soong-agent chat`` against the running stack: the answer streams once, commands work, and a
run that did not complete says why."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

from agent_core.types.runtime import RunFinished, RunState
from soong_agent.chat import describe_end
from tests.conftest import REPO
from tests.e2e.gateway.conftest import Gw, SseEvent, new_session, read_events
from tests.procs import run_cli

pytestmark = pytest.mark.e2e


def _chat(gw: Gw, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SOONG_API_KEY": gw.stack.api_key, "COLUMNS": "100", "TERM": "dumb"}
    return run_cli(["chat", "--url", gw.stack.gateway_url, *args], input=stdin, env=env, cwd=REPO)


def test_chat_streams_the_answer_once_and_runs_commands(gw: Gw) -> None:
    done = _chat(gw, "hello there\n/runs\n/tree\n/files\n/quit\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    session_id = out.split("session ", 1)[1].split()[0]
    with gw.client() as c:
        last = c.get(f"/v1/sessions/{session_id}/tree").json()["nodes"][-1]["node_id"]
        stored = c.get(f"/v1/sessions/{session_id}/nodes/{last}").json()["content"][0]["text"]
    streamed = out.split("✓ lookup\n", 1)[1].split("\n— run", 1)[0]
    assert len(stored) > 500 and streamed == stored  # every token printed exactly once
    assert "⚙ lookup" in out and "✓ lookup" in out and "run completed" in out
    after = out.split("run completed", 1)[1]
    assert "completed" in after and "completed · " not in after  # /runs lists the run once
    assert "user" in out and "hello there" in out  # /tree shows the node
    assert "no files yet" in out
    # Resumed: the conversation so far comes first, then the prompt.
    resumed = _chat(gw, "/quit\n", "--session", session_id)
    assert resumed.returncode == 0, resumed.stderr
    history = resumed.stdout.split("conversation so far", 1)[0]
    assert "> hello there" in history and stored[:60] in history.replace("\n", "")


def test_chat_refuses_without_a_key_or_with_a_foreign_session(gw: Gw) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SOONG_API_KEY"}
    no_key = run_cli(["chat", "--url", gw.stack.gateway_url], env=env, cwd=REPO)
    assert no_key.returncode == 2
    assert no_key.stderr.startswith("error: ") and no_key.stderr.rstrip().endswith("]")
    foreign = _chat(gw, "", "--session", "sess_20200101_000000_0000000000000000")
    assert foreign.returncode == 1
    assert len(foreign.stderr.strip().splitlines()) == 1
    assert foreign.stderr.startswith("error: ") and foreign.stderr.rstrip().endswith("[not_found]")


def _chat_on(gw: Gw, sid: str) -> subprocess.Popen[str]:
    """``soong-agent chat --session sid`` with pipes, for a test that types as it goes."""
    env = {**os.environ, "SOONG_API_KEY": gw.stack.api_key, "COLUMNS": "200", "TERM": "dumb"}
    argv = [sys.executable, "-m", "agent_core.cli", "chat", "--url", gw.stack.gateway_url]
    return subprocess.Popen(
        [*argv, "--session", sid],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def _first_run(c: httpx.Client, sid: str) -> str:
    """The id of the session's first run, once the message typed into chat has made it."""
    deadline = time.monotonic() + 60
    while not (runs := c.get(f"/v1/sessions/{sid}/runs").json()["items"]):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return str(runs[0]["run_id"])


def test_chat_says_how_a_cancelled_run_ended(gw: Gw) -> None:
    """A run cancelled while chat waits on its permission prompt: chat prints its end reason."""
    with gw.client() as c:
        sid = new_session(c, agent_config={"tool_policy": {"ask": ["lookup"]}})
        with _chat_on(gw, sid) as chat:
            assert chat.stdin is not None
            chat.stdin.write("wait for me\n")
            chat.stdin.flush()
            run_id = _first_run(c, sid)
            events = f"/v1/sessions/{sid}/runs/{run_id}/events"
            head: list[SseEvent] = []
            while not head or head[-1].event != "permission_requested":
                last = head[-1].id if head else None
                head += read_events(c, events, stop_after=1, last_event_id=last)
            cancelled = c.post(f"/v1/sessions/{sid}/runs/{run_id}/cancel", params={"wait": True})
            assert cancelled.json()["status"] == "cancelled", cancelled.text
            out, err = chat.communicate("n\n/quit\n", timeout=60)
        assert chat.returncode == 0, err
        state = RunState.model_validate(c.get(f"/v1/sessions/{sid}/runs/{run_id}").json())
    ended = RunFinished(
        run_id=run_id,
        session_id=sid,
        status=state.status,
        end_reason=state.end_reason,
        error=state.error,
    )
    assert describe_end(ended) in out and "— run cancelled" in out


def test_cancel_typed_while_the_answer_streams_cancels_the_run(gw: Gw) -> None:
    """`/cancel` typed mid-answer reaches the run at once (not after the answer has ended)."""
    with gw.client() as c:
        sid = new_session(c)
        with _chat_on(gw, sid) as chat:
            assert chat.stdin is not None
            chat.stdin.write("long\n")  # the demo model's answer of many words, a few at a time
            chat.stdin.flush()
            run_id = _first_run(c, sid)
            events = f"/v1/sessions/{sid}/runs/{run_id}/events"
            head: list[SseEvent] = []
            while not any(e.event == "text_delta" for e in head):  # the answer is streaming
                last = head[-1].id if head else None
                head += read_events(c, events, stop_after=1, last_event_id=last)
            chat.stdin.write("/cancel\n")
            chat.stdin.flush()
            out, err = chat.communicate("/quit\n", timeout=60)
        assert chat.returncode == 0, err
        run = c.get(f"/v1/sessions/{sid}/runs/{run_id}").json()
    assert run["status"] == "cancelled", run
    assert "— run cancelled" in out


def test_chat_compact_compacts_the_session(gw: Gw) -> None:
    done = _chat(gw, "first question\nsecond question\n/compact\n/tree\n/quit\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Compacted: " in out and "earlier messages are" in out  # the run's answer
    assert "[compaction]" in out  # /tree shows the compaction node
    session_id = out.split("session ", 1)[1].split()[0]
    with gw.client() as c:
        nodes = c.get(f"/v1/sessions/{session_id}/tree").json()["nodes"]
    assert [n["node_type"] for n in nodes].count("compaction") == 1


def test_chat_regenerates_the_last_answer_beside_the_first(gw: Gw) -> None:
    done = _chat(gw, "help\n/regenerate\n/quit\n")
    assert done.returncode == 0, done.stderr
    session_id = done.stdout.split("session ", 1)[1].split()[0]
    assert done.stdout.count("run completed") == 2, done.stdout
    with gw.client() as c:
        nodes = c.get(f"/v1/sessions/{session_id}/tree").json()["nodes"]
    asked = [n for n in nodes if n["role"] == "user" and n["preview"] == "help"]
    assert len(asked) == 2 and asked[0]["parent_id"] == asked[1]["parent_id"] is None
