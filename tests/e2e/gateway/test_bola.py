"""BOLA matrix (AU-01): account B calls every endpoint with account A's ids — all 404, no A data."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from services.gateway.openai_compat import response_id
from tests.e2e.gateway.conftest import Gw, _create_key, new_session, run_message
from tests.e2e.gateway.test_api import _seed_artifact, _until_permission
from tests.e2e.gateway.test_mcp_server import _mcp

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Ids:
    session_id: str
    run_id: str
    node_id: str
    artifact_id: str
    request_id: str
    pending_session_id: str
    pending_run_id: str
    assistant_id: str


@pytest.fixture(scope="module")
def a_ids(gw: Gw) -> Ids:
    """A's session with a finished run, an artifact and files; and a run waiting on a permission."""
    with gw.client() as c:
        sid = new_session(c, metadata={"secret": "alpha-owner-data"})
        run_id, events = run_message(c, sid, "alpha private text")
        node_id = next(
            e.data["node"]["node_id"] for e in events if e.event == "node_created" and e.data
        )
        assert c.put(f"/v1/sessions/{sid}/files/input/a.txt", content=b"alpha").status_code == 201
        (gw.stack.home / "accounts" / "dev" / "sessions" / sid / "output" / "r.md").write_text(
            "alpha"
        )
        artifact_id = _seed_artifact(gw, sid, "output/r.md")
        pending = new_session(c, agent_config={"tool_policy": {"ask": ["lookup"]}})
        pending_run = c.post(f"/v1/sessions/{pending}/messages", json={"text": "wait"}).json()[
            "run_id"
        ]
        request_id = _until_permission(c, pending, pending_run)
        assistant = c.post(
            "/v1/assistants", json={"name": "alpha-helper", "instructions": "alpha instructions"}
        )
        assert assistant.status_code == 201, assistant.text
        assistant_id = assistant.json()["assistant_id"]
        return Ids(
            sid, run_id, node_id, artifact_id, request_id, pending, pending_run, assistant_id
        )


def _matrix(ids: Ids) -> list[tuple[str, str, dict[str, Any] | bytes | None]]:
    s, r, n, a = ids.session_id, ids.run_id, ids.node_id, ids.artifact_id
    p, pr = ids.pending_session_id, ids.pending_run_id
    return [
        ("GET", f"/v1/sessions/{s}", None),
        ("PATCH", f"/v1/sessions/{s}", {"status": "archived"}),
        ("PATCH", f"/v1/sessions/{s}", {"metadata": {"owned": "by bob"}}),
        ("POST", f"/v1/sessions/{s}/messages", {"text": "hijack"}),
        ("POST", f"/v1/sessions/{s}/messages", {"text": "hijack", "stream": True}),
        ("POST", f"/v1/sessions/{s}/messages", {"text": "x", "parent_node_id": n}),
        ("POST", f"/v1/sessions/{s}/compact", None),
        ("GET", f"/v1/sessions/{s}/runs", None),
        ("GET", f"/v1/sessions/{s}/runs/{r}", None),
        ("POST", f"/v1/sessions/{s}/runs/{r}/cancel", None),
        ("POST", f"/v1/sessions/{p}/runs/{pr}/cancel?wait=true", None),
        ("GET", f"/v1/sessions/{s}/runs/{r}/events", None),
        ("GET", f"/v1/sessions/{p}/runs/{pr}/events", None),
        ("GET", f"/v1/sessions/{s}/runs/{r}/files", None),
        ("GET", f"/v1/sessions/{s}/tree", None),
        ("GET", f"/v1/sessions/{s}/nodes/{n}", None),
        ("GET", f"/v1/sessions/{s}/nodes/{n}/context", None),
        ("POST", f"/v1/sessions/{s}/switch_node", {"node_id": n}),
        ("POST", f"/v1/sessions/{s}/nodes/{n}/regenerate", {}),
        ("GET", f"/v1/sessions/{s}/events", None),
        ("GET", f"/v1/sessions/{s}/events?run_id={r}", None),
        ("GET", f"/v1/sessions/{s}/agents", None),
        ("GET", f"/v1/sessions/{s}/skills", None),
        ("GET", f"/v1/sessions/{s}/hooks", None),
        ("GET", f"/v1/sessions/{p}/permissions", None),
        ("POST", f"/v1/sessions/{p}/permissions/{ids.request_id}", {"behavior": "allow"}),
        ("GET", f"/v1/sessions/{s}/artifacts", None),
        ("GET", f"/v1/sessions/{s}/artifacts/{a}", None),
        ("GET", f"/v1/sessions/{s}/artifacts/{a}/content", None),
        ("GET", f"/v1/sessions/{s}/files?area=input", None),
        ("GET", f"/v1/sessions/{s}/files?area=output", None),
        ("GET", f"/v1/sessions/{s}/files/input/a.txt", None),
        ("GET", f"/v1/sessions/{s}/files/output/r.md", None),
        ("PUT", f"/v1/sessions/{s}/files/input/b.txt", b"bob was here"),
        # Named agents: by id and by name, every operation; and sessions made from one.
        *[
            row
            for ref in (ids.assistant_id, "alpha-helper")
            for row in (
                ("GET", f"/v1/assistants/{ref}", None),
                ("GET", f"/v1/assistants/{ref}?version=1", None),
                ("GET", f"/v1/assistants/{ref}/versions", None),
                ("PATCH", f"/v1/assistants/{ref}", {"instructions": "bob's now"}),
                ("PUT", f"/v1/assistants/{ref}", {"instructions": "bob's now"}),
                ("DELETE", f"/v1/assistants/{ref}", None),
                ("POST", "/v1/sessions", {"assistant": ref}),
                # The OpenAI-compatible endpoint: the model is an assistant.
                *[
                    ("POST", "/v1/openai/chat/completions", {**_CHAT, "model": ref, **more})
                    for more in ({}, {"stream": True})
                ],
                *[
                    ("POST", "/v1/openai/responses", {"model": ref, "input": "x", **more})
                    for more in ({}, {"stream": True})
                ],
                # Its A2A card and endpoint (the MCP server has one URL: see the test below).
                ("GET", f"/a2a/{ref}/.well-known/agent-card.json", None),
                ("POST", f"/a2a/{ref}", _a2a("SendMessage", _a2a_message("hijack"))),
                ("POST", f"/a2a/{ref}", _a2a("GetTask", {"id": r})),
                ("POST", f"/a2a/{ref}", _a2a("CancelTask", {"id": pr})),
            )
        ],
    ]


_CHAT = {"messages": [{"role": "user", "content": "hijack"}]}


def _a2a(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _a2a_message(text: str, context_id: str = "") -> dict[str, Any]:
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"message": {**message, **({"contextId": context_id} if context_id else {})}}


@pytest.fixture(scope="module")
def key_m(gw: Gw) -> str:
    """A third account's key: one that has an assistant of its own (B's must stay without)."""
    return _create_key(gw.redis_url, "mallory")


async def test_account_b_reaches_no_a_ids_over_mcp_and_a2a(gw: Gw, a_ids: Ids, key_m: str) -> None:
    """Through its own assistant, another account names A's sessions and runs: refused alike,
    nothing of A's changes, and its tools are its own."""
    with gw.client(key_m) as bob:
        made = bob.post("/v1/assistants", json={"name": "bob-helper"})
        assert made.status_code == 201, made.text
        headers = {"A2A-Version": "1.0"}
        for real, swapped in (
            (a_ids.session_id, a_ids.session_id[:-16] + "0" * 16),
            (a_ids.pending_session_id, a_ids.pending_session_id[:-16] + "0" * 16),
        ):
            bodies = [
                bob.post(
                    "/a2a/bob-helper",
                    json=_a2a("SendMessage", _a2a_message("x", s)),
                    headers=headers,
                )
                for s in (real, swapped)
            ]
            assert [b.status_code for b in bodies] == [200, 200]
            assert bodies[0].json()["error"] == bodies[1].json()["error"]
        for method, run in (("GetTask", a_ids.run_id), ("CancelTask", a_ids.pending_run_id)):
            answer = bob.post("/a2a/bob-helper", json=_a2a(method, {"id": run}), headers=headers)
            assert answer.json()["error"]["code"] == -32001, answer.text  # task not found
            assert "alpha" not in answer.text
    async with _mcp(gw, key_m) as session:
        assert [t.name for t in (await session.list_tools()).tools] == ["bob-helper"]
        for name, args in (
            ("alpha-helper", {"message": "hijack"}),
            ("bob-helper", {"message": "hijack", "session_id": a_ids.session_id}),
            ("bob-helper", {"message": "hijack", "session_id": a_ids.pending_session_id}),
        ):
            with pytest.raises(MCPError) as caught:
                await session.call_tool(name, args)
            assert caught.value.code == -32602 and "alpha" not in caught.value.message
    with gw.client() as alice:
        runs = alice.get(f"/v1/sessions/{a_ids.session_id}/runs").json()["items"]
        assert [r["run_id"] for r in runs] == [a_ids.run_id]
        pending = alice.get(f"/v1/sessions/{a_ids.pending_session_id}/runs").json()["items"]
        assert [r["status"] for r in pending] == ["pending"]


def _swap(path: str, ids: Ids) -> str:
    """The same request with never-existing ids of the same shape."""
    for real in (ids.session_id, ids.pending_session_id):
        path = path.replace(real, real[:-16] + "0" * 16)
    for real in (ids.run_id, ids.pending_run_id, ids.node_id, ids.artifact_id, ids.assistant_id):
        path = path.replace(real, real.split("_")[0] + "_" + "0" * 16)
    return path.replace(ids.request_id, "0" * len(ids.request_id))


def test_account_b_gets_404_everywhere(gw: Gw, a_ids: Ids) -> None:
    secrets_of_a = [
        a_ids.session_id,
        a_ids.run_id,
        a_ids.node_id,
        a_ids.artifact_id,
        a_ids.request_id,
        a_ids.pending_session_id,
        a_ids.pending_run_id,
        a_ids.assistant_id,
        "alpha",
        "dev",
    ]
    with gw.client(gw.key_b) as bob:
        for method, path, body in _matrix(a_ids):
            kwargs: dict[str, Any] = {}
            if isinstance(body, bytes):
                kwargs["content"] = body
            elif body is not None:
                kwargs["json"] = body
            foreign = bob.request(method, path, **kwargs)
            assert foreign.status_code == 404, (method, path, foreign.text)
            assert not any(secret in foreign.text for secret in secrets_of_a), (
                method,
                path,
                foreign.text,
            )
            missing = bob.request(method, _swap(path, a_ids), **kwargs)
            assert missing.status_code == 404 and missing.content == foreign.content, (method, path)
        listed = bob.get("/v1/sessions").json()["items"]
        assert not any(s in json.dumps(listed) for s in secrets_of_a[:8])
        assert bob.get("/v1/assistants", params={"include_archived": True}).json()["items"] == []
    # Nothing of A changed under B's attempts.
    with gw.client() as alice:
        session = alice.get(f"/v1/sessions/{a_ids.session_id}").json()
        assert session["status"] == "active" and session["metadata"] == {
            "secret": "alpha-owner-data"
        }
        runs = alice.get(f"/v1/sessions/{a_ids.session_id}/runs").json()["items"]
        assert [r["run_id"] for r in runs] == [a_ids.run_id]
        pending = alice.get(
            f"/v1/sessions/{a_ids.pending_session_id}/runs/{a_ids.pending_run_id}"
        ).json()
        assert pending["status"] == "pending"  # still waiting on her decision
        files = alice.get(f"/v1/sessions/{a_ids.session_id}/files", params={"area": "input"}).json()
        assert [f["path"] for f in files["items"]] == ["input/a.txt"]
        # A can still decide her own request: B's attempt left no decision behind.
        decided = alice.post(
            f"/v1/sessions/{a_ids.pending_session_id}/permissions/{a_ids.request_id}",
            json={"behavior": "deny"},
        )
        assert decided.status_code == 200
        # Her assistant is as she made it: B neither changed nor archived it.
        mine = alice.get(f"/v1/assistants/{a_ids.assistant_id}").json()
        assert (mine["version"], mine["status"], mine["instructions"]) == (
            1,
            "active",
            "alpha instructions",
        )


def test_another_account_cannot_continue_a_conversation_through_openai(gw: Gw, a_ids: Ids) -> None:
    """A's session named by the session header, or by a response id of A's run, with a model
    that is the caller's own assistant (so that only the session stands between): 404 alike for
    a session that never existed, and nothing of A's in the answer. (Carol, not Bob: Bob has no
    assistant, which the test above checks.)"""
    s, r = a_ids.session_id, a_ids.run_id
    carol = _create_key(gw.redis_url, "carol")
    with gw.client(carol) as c:
        assert c.post("/v1/assistants", json={"name": "carol-helper"}).status_code == 201

    def calls(session_id: str, run_id: str) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
        header = {"X-Soong-Session-Id": session_id}
        previous = {"previous_response_id": response_id(session_id, run_id)}
        mine = {"model": "carol-helper"}
        return [
            ("/v1/openai/chat/completions", {**_CHAT, **mine}, header),
            ("/v1/openai/chat/completions", {**_CHAT, **mine, "stream": True}, header),
            ("/v1/openai/responses", {**mine, "input": "x"}, header),
            ("/v1/openai/responses", {**mine, "input": "x", **previous}, {}),
            ("/v1/openai/responses", {**mine, "input": "x", "stream": True, **previous}, {}),
        ]

    never = calls(s[:-16] + "0" * 16, "run_" + "0" * 16)
    with gw.client(carol) as c:
        for (path, body, headers), missing in zip(calls(s, r), never, strict=True):
            foreign = c.post(path, json=body, headers=headers)
            assert foreign.status_code == 404, (path, body, foreign.text)
            assert not any(x in foreign.text for x in (s, r, "alpha", "dev")), foreign.text
            assert set(foreign.json()["error"]) == {"message", "type", "param", "code"}
            other = c.post(missing[0], json=missing[1], headers=missing[2])
            assert (other.status_code, other.content) == (404, foreign.content), path
    with gw.client() as alice:
        runs = alice.get(f"/v1/sessions/{s}/runs").json()["items"]
        assert [run["run_id"] for run in runs] == [r]
