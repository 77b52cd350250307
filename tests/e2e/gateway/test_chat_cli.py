"""``soong-agent chat`` against the running stack: the answer streams once, commands work."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.e2e.gateway.conftest import Gw

pytestmark = pytest.mark.e2e


def _chat(gw: Gw, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SOONG_API_KEY": gw.stack.api_key, "COLUMNS": "100", "TERM": "dumb"}
    return subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "chat", "--url", gw.stack.gateway_url, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )


def test_chat_streams_the_answer_once_and_runs_commands(gw: Gw) -> None:
    done = _chat(gw, "hello there\n/runs\n/tree\n/files\n/cancel\n/quit\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    session_id = out.split("session ", 1)[1].split()[0]
    with gw.client() as c:
        last = c.get(f"/v1/sessions/{session_id}/tree").json()["nodes"][-1]["node_id"]
        stored = c.get(f"/v1/sessions/{session_id}/nodes/{last}").json()["content"][0]["text"]
    streamed = out.split("✓ lookup\n", 1)[1].split("\n— run", 1)[0]
    assert len(stored) > 500 and streamed == stored  # every token printed exactly once
    assert "⚙ lookup" in out and "✓ lookup" in out and "run completed" in out
    assert "completed" in out.split("run completed", 1)[1]  # /runs lists the run
    assert "user" in out and "hello there" in out  # /tree shows the node
    resumed = _chat(gw, "/tree\n", "--session", session_id)
    assert resumed.returncode == 0 and "hello there" in resumed.stdout


def test_chat_refuses_without_a_key_or_with_a_foreign_session(gw: Gw) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SOONG_API_KEY"}
    no_key = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "chat", "--url", gw.stack.gateway_url],
        input="",
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    assert no_key.returncode == 2
    assert _chat(gw, "", "--session", "sess_20200101_000000_0000000000000000").returncode == 1
