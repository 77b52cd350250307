"""Named agents through the HTTP API and the CLI, on a stack of its own whose model is the OpenAI
fake answering with what reached it: the model name and the system prompt.

Create, list, read, update (versions, ETags), archive; a session made from an assistant runs
with its definition and stays pinned to its version after an update; a session may override
only what the definition allows. Account isolation is in ``test_bola.py`` (and below for
sessions made from another account's assistant).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REPO, Stack, start_stack, stop_stack
from tests.e2e.gateway.conftest import _create_key, read_events
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.run_worker.harness import (
    fake_server,
    last_role,
    text_answer,
    tool_calls_turn,
)
from tests.procs import run_cli

pytestmark = pytest.mark.e2e


def _echo(request: Any) -> Any:
    """The answer names the model and the system prompt the run sent. A message ``DISPATCH
    <name>`` asks for a worker running as assistant ``<name>``, then answers with its result."""
    first = next(m for m in request["messages"] if m["role"] == "user")["content"]
    if str(first).startswith("DISPATCH ") and last_role(request) == "tool":
        return text_answer(f"parent got: {request['messages'][-1]['content']}")
    if str(first).startswith("DISPATCH "):
        name = str(first).removeprefix("DISPATCH ").strip()
        args = {"worker": "w1", "task": "TASK review it", "assistant": name}
        return tool_calls_turn(("call_w", "dispatch_worker", args))
    system = " ".join(
        str(m["content"]) for m in request["messages"] if m["role"] in ("system", "developer")
    )
    return text_answer(f"model={request['model']} system={system}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, str]]:
    """The stack, and account bob's key."""
    home: Path = tmp_path_factory.mktemp("assistants-home")
    fake: FakeOpenAIServer = fake_server(_echo)
    (home / "config.toml").write_text(
        f"""
[providers.second]
kind = "openai"
base_url = "{fake.sdk_base_url}"
api_key_env = "SECOND_KEY"
models = ["m2", "m2-large"]
"""
    )
    env = {
        "SOONG_MODEL_PROVIDER": "openai",
        "SOONG_MODEL_NAME": "fake-model",
        "SOONG_MODEL_BASE_URL": fake.sdk_base_url,
        "OPENAI_API_KEY": "sk-test-not-a-real-key-000000",
        "SECOND_KEY": "sk-test-second-000000000000",
    }
    running = start_stack(home, workers=1, extra_env=env)
    try:
        redis_url = json.loads((home / "run" / "stack.json").read_text())["redis_url"]
        yield running, _create_key(redis_url, "bob")
    finally:
        stop_stack(running.process)
        fake.stop_thread()


def _client(stack: Stack, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key or stack.api_key}"}
    return httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=30)


def _answer(c: httpx.Client, sid: str, text: str = "hi", **body: Any) -> str:
    """Post a message, read its run to the end; the text of the node it ended on."""
    posted = c.post(f"/v1/sessions/{sid}/messages", json={"text": text, **body})
    assert posted.status_code == 202, posted.text
    run_id = posted.json()["run_id"]
    events = read_events(c, f"/v1/sessions/{sid}/runs/{run_id}/events")
    assert events[-1].event == "run_finished" and events[-1].data is not None
    assert events[-1].data["status"] == "completed", events[-1].data
    # The answer node, not the text deltas: a run that ended before its stream was opened may
    # be replayed from the durable timeline, which has no deltas.
    node = c.get(f"/v1/sessions/{sid}/nodes/{events[-1].data['last_node_id']}").json()
    return "".join(b["text"] for b in node["content"] if b["type"] == "text")


_REVIEWER = {
    "name": "reviewer",
    "description": "reviews patches",
    "instructions": "REVIEWER-V1",
    "config": {"provider": "second", "model": "m2", "max_turns": 4},
    "overridable": ["model", "temperature"],
}


def test_create_list_read_update_and_archive(stack: tuple[Stack, str]) -> None:
    running, _ = stack
    with _client(running) as c:
        created = c.post("/v1/assistants", json={**_REVIEWER, "name": "crud"})
        assert created.status_code == 201, created.text
        body = created.json()
        aid = body["assistant_id"]
        assert created.headers["location"] == f"/v1/assistants/{aid}"
        assert created.headers["etag"] == '"v1"'
        assert (body["version"], body["status"], body["instructions"]) == (
            1,
            "active",
            "REVIEWER-V1",
        )
        assert body["overridable"] == ["model", "temperature"]

        again = c.post("/v1/assistants", json={**_REVIEWER, "name": "crud"})
        assert again.status_code == 409 and again.json()["error"]["code"] == "assistant_exists"

        names = [a["name"] for a in c.get("/v1/assistants").json()["items"]]
        assert "crud" in names
        assert c.get(f"/v1/assistants/{aid}").json() == c.get("/v1/assistants/crud").json()

        patched = c.patch(
            "/v1/assistants/crud", json={"instructions": "V2"}, headers={"If-Match": '"v1"'}
        )
        assert patched.status_code == 200, patched.text
        assert (patched.json()["version"], patched.json()["instructions"]) == (2, "V2")
        assert patched.json()["config"]["model"] == "m2"  # the fields not given are kept
        stale = c.patch(
            "/v1/assistants/crud", json={"instructions": "V3"}, headers={"If-Match": '"v1"'}
        )
        assert stale.status_code == 412 and stale.json()["error"]["code"] == "version_mismatch"
        replaced = c.put("/v1/assistants/crud", json={"instructions": "V3"})
        assert replaced.status_code == 200 and replaced.json()["version"] == 3
        # PUT replaces the whole definition: the config is back to none set.
        assert not any(replaced.json()["config"].values())

        old = c.get("/v1/assistants/crud", params={"version": 1}).json()
        assert (old["version"], old["latest_version"], old["instructions"]) == (1, 3, "REVIEWER-V1")
        versions = c.get("/v1/assistants/crud/versions").json()["items"]
        assert [v["version"] for v in versions] == [1, 2, 3]

        assert c.delete("/v1/assistants/crud").status_code == 204
        assert c.get("/v1/assistants/crud").status_code == 404
        assert c.get(f"/v1/assistants/{aid}").json()["status"] == "archived"
        assert "crud" not in [a["name"] for a in c.get("/v1/assistants").json()["items"]]
        listed = c.get("/v1/assistants", params={"include_archived": True}).json()["items"]
        assert aid in [a["assistant_id"] for a in listed]
        # The name is free again.
        assert c.post("/v1/assistants", json={**_REVIEWER, "name": "crud"}).status_code == 201


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"config": {"provider": "nowhere"}}, "unknown_provider"),
        ({"config": {"provider": "second", "model": "m9"}}, "unknown_model"),
        ({"config": {"system_prompt": "x"}}, "validation_error"),
        ({"overridable": ["cwd"]}, "validation_error"),
        ({"name": "asst_0123456789abcdef"}, "validation_error"),
    ],
)
def test_a_definition_that_cannot_run_is_refused(
    stack: tuple[Stack, str], change: dict[str, Any], code: str
) -> None:
    running, _ = stack
    with _client(running) as c:
        refused = c.post("/v1/assistants", json={**_REVIEWER, "name": "bad", **change})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == code
        patched = c.patch("/v1/assistants/missing", json={"instructions": "x"})
        assert patched.status_code == 404


def test_a_session_runs_with_its_assistant_and_stays_pinned(stack: tuple[Stack, str]) -> None:
    running, _ = stack
    with _client(running) as c:
        assert c.post("/v1/assistants", json={**_REVIEWER, "name": "pinned"}).status_code == 201
        made = c.post("/v1/sessions", json={"assistant": "pinned"})
        assert made.status_code == 201, made.text
        sid = made.json()["session_id"]
        pin = made.json()["metadata"]["assistant"]
        assert (pin["name"], pin["version"]) == ("pinned", 1)
        assert _answer(c, sid) == "model=m2 system=REVIEWER-V1"

        update = {
            "instructions": "REVIEWER-V2",
            "config": {"provider": "second", "model": "m2-large"},
        }
        assert c.patch("/v1/assistants/pinned", json=update).json()["version"] == 2
        # The session made from v1 keeps v1; a new one gets v2.
        assert _answer(c, sid, "again") == "model=m2 system=REVIEWER-V1"
        newer = c.post("/v1/sessions", json={"assistant": "pinned"}).json()
        assert newer["metadata"]["assistant"]["version"] == 2
        assert _answer(c, newer["session_id"]) == "model=m2-large system=REVIEWER-V2"
        older = c.post("/v1/sessions", json={"assistant": "pinned", "assistant_version": 1}).json()
        assert _answer(c, older["session_id"]) == "model=m2 system=REVIEWER-V1"

        # The session's own metadata updates keep the pin.
        c.patch(f"/v1/sessions/{sid}", json={"metadata": {"title": "t"}})
        kept = c.get(f"/v1/sessions/{sid}").json()["metadata"]
        assert kept["title"] == "t" and kept["assistant"]["version"] == 1
        # An archived assistant's sessions run on.
        assert c.delete("/v1/assistants/pinned").status_code == 204
        assert _answer(c, sid, "still") == "model=m2 system=REVIEWER-V1"
        gone = c.post("/v1/sessions", json={"assistant": "pinned"})
        assert gone.status_code == 404


def test_a_session_overrides_only_what_the_assistant_allows(stack: tuple[Stack, str]) -> None:
    running, _ = stack
    with _client(running) as c:
        assert c.post("/v1/assistants", json={**_REVIEWER, "name": "strict"}).status_code == 201
        allowed = c.post(
            "/v1/sessions", json={"assistant": "strict", "agent_config": {"model": "m2-large"}}
        )
        assert allowed.status_code == 201, allowed.text
        sid = allowed.json()["session_id"]
        assert _answer(c, sid) == "model=m2-large system=REVIEWER-V1"

        for refused_config in (
            {"max_turns": 50},
            {"system_prompt": "obey me"},
            {"enabled_tools": []},
        ):
            refused = c.post(
                "/v1/sessions", json={"assistant": "strict", "agent_config": refused_config}
            )
            assert refused.status_code == 409, refused.text
            error = refused.json()["error"]
            assert error["code"] == "override_not_allowed"
            assert error["details"]["fields"] == list(refused_config)
        # Within what is allowed, the provider's checks still apply.
        unknown = c.post(
            "/v1/sessions", json={"assistant": "strict", "agent_config": {"model": "m9"}}
        )
        assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "unknown_model"
        # A message's overrides are held to the same list.
        posted = c.post(
            f"/v1/sessions/{sid}/messages", json={"text": "x", "agent_config": {"max_turns": 9}}
        )
        assert (
            posted.status_code == 409 and posted.json()["error"]["code"] == "override_not_allowed"
        )
        assert _answer(c, sid, "y", agent_config={"model": "m2"}) == "model=m2 system=REVIEWER-V1"
        # The pin is the server's: a client cannot write it as metadata.
        forged = c.post("/v1/sessions", json={"metadata": {"assistant": {"version": 9}}})
        assert forged.status_code == 422


def test_another_account_cannot_start_a_session_from_it(stack: tuple[Stack, str]) -> None:
    running, bob_key = stack
    with _client(running) as alice:
        aid = alice.post("/v1/assistants", json={**_REVIEWER, "name": "private"}).json()[
            "assistant_id"
        ]
    with _client(running, bob_key) as bob:
        for ref in ("private", aid):
            made = bob.post("/v1/sessions", json={"assistant": ref})
            assert made.status_code == 404 and "REVIEWER" not in made.text
        assert bob.get("/v1/assistants").json()["items"] == []
        # Bob's own assistant of the same name is his alone.
        mine = bob.post(
            "/v1/assistants", json={**_REVIEWER, "name": "private", "instructions": "BOB"}
        )
        assert mine.status_code == 201
        sid = bob.post("/v1/sessions", json={"assistant": "private"}).json()["session_id"]
        assert _answer(bob, sid) == "model=m2 system=BOB"
    with _client(running) as alice:
        assert alice.get("/v1/assistants/private").json()["instructions"] == "REVIEWER-V1"


def test_an_orchestrators_worker_runs_as_a_named_agent(stack: tuple[Stack, str]) -> None:
    running, bob_key = stack
    with _client(running) as c:
        made = c.post(
            "/v1/assistants", json={**_REVIEWER, "name": "helper", "instructions": "HELPER"}
        )
        assert made.status_code == 201
        sid = c.post("/v1/sessions", json={"mode": "orchestrator"}).json()["session_id"]
        # The worker ran with the assistant's model and instructions, not the session's.
        assert _answer(c, sid, "DISPATCH helper") == "parent got: model=m2 system=HELPER"
        runs = c.get(f"/v1/sessions/{sid}/runs").json()["items"]
        child = next(r for r in runs if r["metadata"].get("kind") == "child")
        assert (child["metadata"]["assistant"], child["metadata"]["assistant_version"]) == (
            "helper",
            1,
        )
        # A name the account does not have is a tool error the model reads; the run goes on.
        sid2 = c.post("/v1/sessions", json={"mode": "orchestrator"}).json()["session_id"]
        assert "no assistant named 'nobody'" in _answer(c, sid2, "DISPATCH nobody")
    with _client(running, bob_key) as bob:  # another account's assistant is not found either
        sid3 = bob.post("/v1/sessions", json={"mode": "orchestrator"}).json()["session_id"]
        assert "no assistant named 'helper'" in _answer(bob, sid3, "DISPATCH helper")


def test_the_cli_manages_assistants(stack: tuple[Stack, str], tmp_path: Path) -> None:
    running, _ = stack
    env = {**os.environ, "SOONG_GATEWAY_URL": running.gateway_url, "SOONG_API_KEY": running.api_key}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(["assistants", *args], env=env, cwd=REPO)

    definition = tmp_path / "def.json"
    definition.write_text(json.dumps({**_REVIEWER, "name": "from-cli"}))
    created = cli("create", "--file", str(definition))
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["version"] == 1
    assert "from-cli  v1" in cli("list").stdout
    changes = tmp_path / "changes.json"
    changes.write_text(json.dumps({"instructions": "CLI-V2"}))
    assert cli("update", "from-cli", "--file", str(changes), "--if-version", "1").returncode == 0
    shown = json.loads(cli("show", "from-cli", "--version", "1").stdout)
    assert (shown["version"], shown["instructions"]) == (1, "REVIEWER-V1")
    twice = cli("create", "--file", str(definition))
    assert twice.returncode == 1 and "[assistant_exists]" in twice.stderr
    assert "Traceback" not in twice.stderr
    assert cli("delete", "from-cli").returncode == 0
    missing = cli("show", "from-cli")
    assert missing.returncode == 1 and "[not_found]" in missing.stderr


def test_chat_starts_a_session_from_an_assistant(stack: tuple[Stack, str]) -> None:
    running, _ = stack
    with _client(running) as c:
        made = c.post(
            "/v1/assistants", json={**_REVIEWER, "name": "chatty", "instructions": "CHATTY"}
        )
        assert made.status_code == 201
    env = {**os.environ, "SOONG_API_KEY": running.api_key, "COLUMNS": "100", "TERM": "dumb"}
    argv = ["chat", "--url", running.gateway_url, "--assistant", "chatty"]
    done = run_cli(argv, input="hello\n/quit\n", env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "model=m2 system=CHATTY" in done.stdout
