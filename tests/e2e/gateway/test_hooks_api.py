"""``GET /v1/sessions/{id}/hooks`` on a stack of its own: the operator's hooks for every session,
a trusted project's file for sessions in that project (and its hooks really run), a broken
project file reported, commands redacted, another account's session 404."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Stack, start_stack, stop_stack
from tests.e2e.gateway.conftest import new_session, run_message

pytestmark = pytest.mark.e2e

HOOK = "import json, sys; json.load(sys.stdin); print(json.dumps({'decision': 'deny', 'reason': 'project says no'}))"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Path]]:
    home = tmp_path_factory.mktemp("hooks-home")
    projects = tmp_path_factory.mktemp("projects")
    for name, text in (
        (
            "good",
            f'[[PreToolUse]]\nname = "no-lookup"\nmatcher = "lookup"\ncommand = {json.dumps([sys.executable, "-c", HOOK])}\n',
        ),
        ("broken", '[[PreToolUse]]\ncommand = "not an argv"\n'),
    ):
        (projects / name / ".soong-agent").mkdir(parents=True)
        (projects / name / ".soong-agent" / "hooks.toml").write_text(text)
    (home / "config.toml").write_text(
        f"""
[projects]
roots = {{ good = "{projects / "good"}", broken = "{projects / "broken"}" }}

[hooks]
trusted_project_roots = ["{projects}"]

[[hooks.RunEnd]]
name = "audit"
command = ["/bin/true", "--token=sk-live-abcdefghijklmnopqrstuvwx"]
"""
    )
    stack = start_stack(home, workers=1, extra_env={"SOONG_MODEL_PROVIDER": "fake"})
    try:
        yield stack, projects
    finally:
        stop_stack(stack.process)


def _client(stack: Stack) -> httpx.Client:
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    return httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=30)


def test_hooks_in_effect_per_session(stack: tuple[Stack, Path]) -> None:
    running, projects = stack
    with _client(running) as c:
        plain = c.get(f"/v1/sessions/{new_session(c)}/hooks")
        assert plain.status_code == 200, plain.text
        body = plain.json()
        assert [(h["name"], h["event"], h["source"]) for h in body["items"]] == [
            ("audit", "RunEnd", "operator")
        ]
        # The operator's scripts are the deployment's: no command, no host path, no token.
        assert body["items"][0]["command"] is None
        assert "abcdefghijklmnop" not in plain.text and "/bin/true" not in plain.text
        assert body["project_file"] is None and body["problem"] is None

        good = new_session(c, cwd="good")
        listed = c.get(f"/v1/sessions/{good}/hooks").json()
        assert [(h["name"], h["source"], h["on_error"]) for h in listed["items"]] == [
            ("audit", "operator", "continue"),
            ("no-lookup", "project", "block"),
        ]
        assert listed["project_file"] == "good/.soong-agent/hooks.toml"  # logical, not the host's
        assert listed["items"][1]["command"][0] == sys.executable  # the project's own, shown
        assert str(projects) not in json.dumps(listed)
        # The project's hook really runs for the session's runs: the fake model's lookup call
        # is refused, and the timeline says so.
        run_id, _ = run_message(c, good, "look it up")
        events = c.get(f"/v1/sessions/{good}/events", params={"run_id": run_id}).json()["items"]
        hooks = [e["payload"] for e in events if e["event_type"] == "hook_executed"]
        assert [(h["hook"], h["decision"]) for h in hooks] == [
            ("no-lookup", "deny"),
            ("audit", "allow"),
        ]

        broken_sid = new_session(c, cwd="broken")
        broken = c.get(f"/v1/sessions/{broken_sid}/hooks").json()
        assert [h["name"] for h in broken["items"]] == ["audit"]
        assert "shell = true" in broken["problem"]
        assert str(projects) not in broken["problem"]
        assert broken["problem"].startswith("project hooks file broken/.soong-agent/hooks.toml")
        # Its runs fail, naming the file: a broken guard never silently stops guarding.
        run_id, events = run_message(c, broken_sid, "anything")
        finished = events[-1].data
        assert finished is not None and finished["status"] == "failed"
        assert finished["error"]["code"] == "invalid_hooks"
        assert "hooks.toml" in finished["error"]["message"]


def test_another_accounts_session_is_404(stack: tuple[Stack, Path]) -> None:
    running, _ = stack
    with _client(running) as c:
        sid = new_session(c)
        missing = c.get("/v1/sessions/sess_20260101_000000_0000000000000000/hooks")
        assert missing.status_code == 404
        assert c.get(f"/v1/sessions/{sid}/hooks").status_code == 200
