"""Branches only where a conversation can go on; regenerate; the ``branch`` strategy serial.

The fake model's default turn calls ``lookup``; a session that asks before ``lookup`` holds its
run with a tool call and no result yet, which is what the invalid parents need.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.e2e.gateway.conftest import Gw, new_session, read_events, run_message

ASK_LOOKUP = {"agent_config": {"tool_policy": {"ask": ["lookup"]}}}


def _until_permission(c: httpx.Client, sid: str, run_id: str) -> str:
    with c.stream("GET", f"/v1/sessions/{sid}/runs/{run_id}/events") as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and '"permission_requested"' in line:
                return str(json.loads(line[6:])["request"]["request_id"])
    raise AssertionError("the run ended without asking for permission")


def _refused(response: httpx.Response, reason: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_parent" and error["details"]["reason"] == reason
    assert len(error["message"]) > 40  # a sentence that says why, not a bare code


def _post(c: httpx.Client, sid: str, **body: Any) -> httpx.Response:
    return c.post(f"/v1/sessions/{sid}/messages", json=body)


def _finish(c: httpx.Client, sid: str, run_id: str) -> dict[str, Any]:
    events = read_events(c, f"/v1/sessions/{sid}/runs/{run_id}/events")
    assert events[-1].event == "run_finished" and events[-1].data is not None
    return events[-1].data


def _nodes(c: httpx.Client, sid: str) -> list[dict[str, Any]]:
    return list(c.get(f"/v1/sessions/{sid}/tree").json()["nodes"])


def _user_message_above(nodes: list[dict[str, Any]], node_id: str) -> str | None:
    by_id = {n["node_id"]: n for n in nodes}
    node = by_id[node_id]
    while node["role"] != "user":
        if node["parent_id"] is None:
            return None
        node = by_id[node["parent_id"]]
    return str(node["node_id"])


def test_each_invalid_parent_is_refused_with_a_reason(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c, **ASK_LOOKUP)
        first = _post(c, sid, text="look this up").json()
        _until_permission(c, sid, first["run_id"])
        path = c.get(f"/v1/sessions/{sid}/path").json()["items"]
        calls = next(n for n in path if n["role"] == "assistant")
        assert any(b["type"] == "tool_call" for b in calls["content"])
        # An assistant turn whose tool call has no result yet, and a user message.
        for node_id, reason in (
            (calls["node_id"], "tool_calls_without_results"),
            (first["node_id"], "user_message"),
        ):
            _refused(_post(c, sid, text="x", parent_node_id=node_id), reason)
            _refused(c.post(f"/v1/sessions/{sid}/switch_node", json={"node_id": node_id}), reason)
        cancel = c.post(
            f"/v1/sessions/{sid}/runs/{first['run_id']}/cancel", params={"wait": "true"}
        )
        assert cancel.status_code == 200


def test_branch_waits_its_turn_then_starts_a_new_branch(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c, **ASK_LOOKUP)
        first = _post(c, sid, text="look this up").json()
        request_id = _until_permission(c, sid, first["run_id"])
        # ``branch`` while the run waits: queued, never beside it (one main run at a time).
        second = _post(c, sid, text="help", multitask_strategy="branch")
        assert second.status_code == 202 and second.json()["kind"] == "main"
        second_run = second.json()["run_id"]
        assert c.get(f"/v1/sessions/{sid}/runs/{second_run}").json()["status"] == "queued"
        allowed = c.post(f"/v1/sessions/{sid}/permissions/{request_id}", json={"behavior": "allow"})
        assert allowed.status_code == 200
        assert _finish(c, sid, first["run_id"])["status"] == "completed"
        assert _finish(c, sid, second_run)["status"] == "completed"
        # It started after the first ended, on a new branch from where the first began (here
        # the root: the first message's parent), not after the first's answer.
        events = c.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).json()["items"]
        seq = {(e["run_id"], e["event_type"]): e["seq"] for e in events}
        assert seq[(second_run, "run_started")] > seq[(first["run_id"], "run_completed")]
        placed = c.get(f"/v1/sessions/{sid}/nodes/{second.json()['node_id']}").json()
        assert placed["parent_id"] is None
        roots = [n for n in _nodes(c, sid) if n["parent_id"] is None]
        assert [n["node_id"] for n in roots] == [first["node_id"], second.json()["node_id"]]


def test_a_workers_node_is_refused_and_the_first_message_can_be_replaced(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        run_message(c, sid, "worker")  # the fake model dispatches a worker agent
        root_agent = c.get(f"/v1/sessions/{sid}").json()["root_agent_id"]
        nodes = _nodes(c, sid)
        worker = next(n for n in nodes if n["agent_id"] != root_agent)
        _refused(_post(c, sid, text="x", parent_node_id=worker["node_id"]), "child_agent_node")
        _refused(
            c.post(f"/v1/sessions/{sid}/switch_node", json={"node_id": worker["node_id"]}),
            "child_agent_node",
        )
        regen = c.post(f"/v1/sessions/{sid}/nodes/{worker['node_id']}/regenerate", json={})
        assert regen.status_code == 422 and regen.json()["error"]["code"] == "invalid_node"
        # The first message replaced: a new root beside the old one, which stays.
        replaced = _post(c, sid, text="help", parent_node_id="root")
        assert replaced.status_code == 202, replaced.text
        assert _finish(c, sid, replaced.json()["run_id"])["status"] == "completed"
        node = c.get(f"/v1/sessions/{sid}/nodes/{replaced.json()['node_id']}").json()
        assert node["parent_id"] is None and node["content"] == [{"type": "text", "text": "help"}]
        mains = [n for n in _nodes(c, sid) if n["agent_id"] == root_agent]
        assert len([n for n in mains if n["parent_id"] is None]) == 2  # (a worker's tree: its own)


def test_regenerate_keeps_both_answers_in_the_tree(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        run_message(c, sid, "help")
        run_message(c, sid, "help me again")
        first_answer = c.get(f"/v1/sessions/{sid}").json()["active_node_id"]
        message = next(n for n in _nodes(c, sid) if n["preview"] == "help me again")
        regen = c.post(f"/v1/sessions/{sid}/nodes/{first_answer}/regenerate", json={})
        assert regen.status_code == 202, regen.text
        assert _finish(c, sid, regen.json()["run_id"])["status"] == "completed"
        nodes = _nodes(c, sid)
        again = [n for n in nodes if n["preview"] == "help me again"]
        # Two turns of the same message under the same parent, each with its answer.
        assert [n["node_id"] for n in again][0] == message["node_id"] and len(again) == 2
        assert again[0]["parent_id"] == again[1]["parent_id"]
        turns = {a["node_id"] for a in again}
        answers = {
            n["node_id"]
            for n in nodes
            if n["role"] == "assistant" and _user_message_above(nodes, n["node_id"]) in turns
        }
        assert len(answers) == 2 and first_answer in answers
        assert {_user_message_above(nodes, a) for a in answers} == turns
        session = c.get(f"/v1/sessions/{sid}").json()
        assert session["active_node_id"] in answers - {first_answer}
        # Regenerating a user message itself works the same way.
        again_run = c.post(f"/v1/sessions/{sid}/nodes/{message['node_id']}/regenerate", json={})
        assert again_run.status_code == 202
        _finish(c, sid, again_run.json()["run_id"])
        assert len([n for n in _nodes(c, sid) if n["preview"] == "help me again"]) == 3
