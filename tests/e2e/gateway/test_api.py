"""Every endpoint against the running stack: success paths and error paths."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime

import httpx
import pytest

from tests.e2e.gateway.conftest import (
    Gw,
    new_session,
    read_events,
    run_message,
    seed_artifact,
    seed_offloaded_json,
)
from tests.waiting import HangGuard

pytestmark = pytest.mark.e2e


def _error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, object]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


def test_sessions_create_get_list_patch(gw: Gw) -> None:
    with gw.client() as c:
        created = c.post(
            "/v1/sessions", json={"metadata": {"title": "t"}, "agent_config": {"max_turns": 4}}
        )
        assert created.status_code == 201 and created.headers["location"].endswith(
            created.json()["session_id"]
        )
        sid = created.json()["session_id"]
        got = c.get(f"/v1/sessions/{sid}").json()
        assert got["status"] == "active" and got["metadata"]["title"] == "t"
        assert got["metadata"]["agent_config"] == {"max_turns": 4}
        patched = c.patch(f"/v1/sessions/{sid}", json={"status": "archived", "metadata": {"x": 1}})
        assert patched.status_code == 200 and patched.json()["status"] == "archived"
        assert patched.json()["metadata"] == {"x": 1, "agent_config": {"max_turns": 4}}
        archived = c.get("/v1/sessions", params={"status": "archived"}).json()["items"]
        assert sid in [s["session_id"] for s in archived]
        _error(c.post(f"/v1/sessions/{sid}/messages", json={"text": "x"}), 409, "session_archived")
        assert (
            c.patch(f"/v1/sessions/{sid}", json={"status": "active"}).json()["status"] == "active"
        )
        # Cursor pagination walks every session exactly once.
        for _ in range(3):
            new_session(c)
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, object] = {"limit": 2}
            if cursor:
                params["cursor"] = cursor
            page = c.get("/v1/sessions", params=params).json()
            seen += [s["session_id"] for s in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) and sid in seen


def test_a_session_in_orchestrator_mode(gw: Gw) -> None:
    with gw.client() as c:
        created = c.post("/v1/sessions", json={"mode": "orchestrator"})
        assert created.status_code == 201
        sid = created.json()["session_id"]
        [root] = c.get(f"/v1/sessions/{sid}/agents").json()["items"]
        assert root["agent_type"] == "orchestrator"
        default = new_session(c)
        [plain] = c.get(f"/v1/sessions/{default}/agents").json()["items"]
        assert plain["agent_type"] == "main"
        err = _error(c.post("/v1/sessions", json={"mode": "sub"}), 422, "validation_error")
        assert "mode" in json.dumps(err["details"])


def test_session_errors(gw: Gw) -> None:
    with gw.client() as c:
        _error(c.get("/v1/sessions/sess_20200101_000000_00000000"), 404, "not_found")
        _error(c.get("/v1/sessions/../../etc"), 404)
        err = _error(c.post("/v1/sessions", json={"unknown": 1}), 422, "validation_error")
        assert "unknown" in json.dumps(err["details"])
        err = _error(c.post("/v1/sessions", json={"agent_config": {"base_url": "http://x"}}), 422)
        assert "base_url" in json.dumps(err["details"])
        _error(c.post("/v1/sessions", json={"metadata": {"agent_config": {}}}), 422)
        _error(
            c.post(
                "/v1/sessions", content=b"{not json", headers={"content-type": "application/json"}
            ),
            422,
        )
        _error(c.patch("/v1/sessions/sess_20200101_000000_00000000", json={}), 404)
        _error(c.get("/v1/sessions", params={"limit": 0}), 422)
        _error(c.get("/v1/nope"), 404)
        _error(c.delete("/v1/sessions"), 405)
        # An id with a slash (%2F is decoded before routing) is not found, never redirected.
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        _error(c.get(f"/v1/sessions/{sid}/tasks/%2F"), 404)
        _error(c.get(f"/v1/sessions/{sid}/"), 404)


def test_auth_errors(gw: Gw) -> None:
    url = f"{gw.stack.gateway_url}/v1/sessions"
    for headers in (
        {},
        {"Authorization": ""},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer sa_live_wrong"},
        {"Authorization": "Bearer " + "x" * 10_000},
    ):
        response = httpx.get(url, headers=headers)
        err = _error(response, 401, "unauthorized")
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "sa_live_wrong" not in json.dumps(err)
    # Never in a query string, even a valid key.
    _error(httpx.get(url, params={"api_key": gw.key_b}), 401)
    _error(
        httpx.get(url, params={"token": gw.key_b}, headers={"Authorization": f"Bearer {gw.key_b}"}),
        401,
    )
    # Bob's key was never printed by the stack; no request above made it appear in a log.
    assert gw.key_b not in gw.stack.log()


def test_body_limit_counts_bytes(gw: Gw) -> None:
    with gw.client() as c:
        big = json.dumps({"metadata": {"x": "y" * 70_000}}).encode()
        _error(
            c.post("/v1/sessions", content=big, headers={"content-type": "application/json"}), 413
        )

        def chunks():  # no Content-Length: chunked transfer, the cap still holds
            for _ in range(20):
                yield b" " * 8192

        _error(
            c.post("/v1/sessions", content=chunks(), headers={"content-type": "application/json"}),
            413,
        )
        # A lying Content-Length is not trusted either: the server counts what arrives.
        assert c.get("/healthz").status_code == 200


def test_messages_and_runs(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        run_id, events = run_message(c, sid, "hello")
        kinds = [e.event for e in events]
        assert (
            kinds[0] == "run_status_changed" and "tool_started" in kinds and "text_delta" in kinds
        )
        assert events[-1].data is not None and events[-1].data["status"] == "completed"
        runs = c.get(f"/v1/sessions/{sid}/runs").json()["items"]
        assert [r["run_id"] for r in runs] == [run_id]
        run = c.get(f"/v1/sessions/{sid}/runs/{run_id}").json()
        assert run["status"] == "completed"
        # Cancelling a finished run changes nothing.
        assert c.post(f"/v1/sessions/{sid}/runs/{run_id}/cancel").json()["status"] == "completed"
        # stream=true answers with the run's SSE directly.
        with c.stream(
            "POST",
            f"/v1/sessions/{sid}/messages",
            json={"content": [{"type": "text", "text": "again"}], "stream": True},
        ) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith(
                "text/event-stream"
            )
            assert r.headers["x-run-id"].startswith("run_")
            text = r.read().decode()
        assert text.rstrip().splitlines()[-1].startswith("data: ") and "event: run_finished" in text
        # Errors.
        _error(c.post(f"/v1/sessions/{sid}/messages", json={}), 422)
        _error(
            c.post(
                f"/v1/sessions/{sid}/messages",
                json={"text": "a", "content": [{"type": "text", "text": "b"}]},
            ),
            422,
        )
        _error(
            c.post(
                f"/v1/sessions/{sid}/messages",
                json={"content": [{"type": "tool_call", "id": "x", "name": "y"}]},
            ),
            422,
        )
        _error(
            c.post(
                f"/v1/sessions/{sid}/messages", json={"text": "a", "parent_node_id": "node_0000"}
            ),
            404,
        )
        _error(
            c.post(
                f"/v1/sessions/{sid}/messages", json={"text": "a", "multitask_strategy": "nope"}
            ),
            422,
        )
        _error(c.get(f"/v1/sessions/{sid}/runs/run_0000000000000000"), 404)
        _error(c.post(f"/v1/sessions/{sid}/runs/run_0000000000000000/cancel"), 404)
        _error(c.get(f"/v1/sessions/{sid}/runs/run_0000000000000000/events"), 404)
        _error(
            c.get(f"/v1/sessions/{sid}/runs/{run_id}/events", headers={"Last-Event-ID": "garbage"}),
            400,
            "invalid_last_event_id",
        )


def _ask_session(c: httpx.Client) -> str:
    return new_session(c, agent_config={"tool_policy": {"ask": ["lookup"]}})


def _until_permission(c: httpx.Client, sid: str, run_id: str) -> str:
    with c.stream("GET", f"/v1/sessions/{sid}/runs/{run_id}/events") as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and '"permission_requested"' in line:
                return str(json.loads(line[6:])["request"]["request_id"])
    raise AssertionError("the run ended without asking for permission")


def test_permissions_multitask_and_cancel(gw: Gw) -> None:
    with gw.client() as c:
        sid = _ask_session(c)
        posted = c.post(f"/v1/sessions/{sid}/messages", json={"text": "ask me"}).json()
        request_id = _until_permission(c, sid, posted["run_id"])
        # While the run waits: reject answers 409, enqueue queues behind it.
        _error(
            c.post(
                f"/v1/sessions/{sid}/messages", json={"text": "x", "multitask_strategy": "reject"}
            ),
            409,
        )
        queued = c.post(f"/v1/sessions/{sid}/messages", json={"text": "later"}).json()
        assert c.get(f"/v1/sessions/{sid}/runs/{queued['run_id']}").json()["status"] == "queued"
        # Keep-alive comments while the run is idle.
        with c.stream(
            "GET", f"/v1/sessions/{sid}/runs/{posted['run_id']}/events", params={"keepalive_s": 0.3}
        ) as r:
            guard = HangGuard(60, "a keep-alive comment")
            for line in r.iter_lines():
                if line.startswith(": keep-alive"):
                    break
                guard.check()
        # Decide: bad body, unknown request, then allow; a second decision conflicts.
        _error(
            c.post(f"/v1/sessions/{sid}/permissions/{request_id}", json={"behavior": "maybe"}), 422
        )
        _error(c.post(f"/v1/sessions/{sid}/permissions/nope", json={"behavior": "allow"}), 404)
        ok = c.post(f"/v1/sessions/{sid}/permissions/{request_id}", json={"behavior": "allow"})
        assert ok.status_code == 200 and ok.json()["behavior"] == "allow"
        _error(
            c.post(f"/v1/sessions/{sid}/permissions/{request_id}", json={"behavior": "deny"}),
            409,
            "already_decided",
        )
        done = read_events(c, f"/v1/sessions/{sid}/runs/{posted['run_id']}/events")
        assert done[-1].data is not None and done[-1].data["status"] == "completed"
        # The queued run now waits on its own permission: cancel it with wait=true.
        _until_permission(c, sid, queued["run_id"])
        cancelled = c.post(
            f"/v1/sessions/{sid}/runs/{queued['run_id']}/cancel", params={"wait": "true"}
        )
        assert cancelled.status_code == 200 and cancelled.json()["status"] in (
            "cancelled",
            "aborted",
        )
        # interrupt: a queued run behind a waiting one is cancelled without running.
        first = c.post(f"/v1/sessions/{sid}/messages", json={"text": "one"}).json()
        second = c.post(f"/v1/sessions/{sid}/messages", json={"text": "two"}).json()
        cq = c.post(
            f"/v1/sessions/{sid}/runs/{second['run_id']}/cancel",
            params={"wait": "true", "timeout_s": 20},
        )
        assert cq.status_code == 200 and cq.json()["status"] == "cancelled"
        tail = read_events(c, f"/v1/sessions/{sid}/runs/{second['run_id']}/events")
        assert [e.event for e in tail] == ["run_finished"]
        c.post(f"/v1/sessions/{sid}/runs/{first['run_id']}/cancel", params={"wait": "true"})


def test_tree_nodes_switch_context_events_agents(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        run_message(c, sid, "first")
        tree = c.get(f"/v1/sessions/{sid}/tree").json()
        nodes = tree["nodes"]
        assert nodes[0]["role"] == "user" and nodes[0]["preview"] == "first"
        assert tree["active_node_id"] == nodes[-1]["node_id"]
        node = c.get(f"/v1/sessions/{sid}/nodes/{nodes[0]['node_id']}").json()
        assert node["content"] == [{"type": "text", "text": "first"}]
        report = c.get(f"/v1/sessions/{sid}/nodes/{nodes[-1]['node_id']}/context").json()
        assert report["node_ids"] == [n["node_id"] for n in nodes] and report["token_estimate"] > 0
        # Branch: a second turn, then back to the first answer and a message from there.
        run_message(c, sid, "second")
        first_answer = nodes[-1]["node_id"]
        switched = c.post(f"/v1/sessions/{sid}/switch_node", json={"node_id": first_answer})
        assert switched.json()["active_node_id"] == first_answer
        branch_msg = c.post(
            f"/v1/sessions/{sid}/messages",
            json={"text": "branch", "parent_node_id": first_answer},
        ).json()
        read_events(c, f"/v1/sessions/{sid}/runs/{branch_msg['run_id']}/events")
        branched = c.get(f"/v1/sessions/{sid}/nodes/{branch_msg['node_id']}").json()
        assert branched["parent_id"] == first_answer
        events = c.get(f"/v1/sessions/{sid}/events").json()["items"]
        seqs = [e["seq"] for e in events]
        assert seqs == sorted(seqs) and events[0]["event_type"] == "session_created"
        after = c.get(
            f"/v1/sessions/{sid}/events", params={"after_seq": seqs[2], "limit": 2}
        ).json()
        assert [e["seq"] for e in after["items"]] == seqs[3:5] and after["next_after_seq"] == seqs[
            4
        ]
        per_run = c.get(
            f"/v1/sessions/{sid}/events", params={"run_id": branch_msg["run_id"]}
        ).json()["items"]
        assert per_run and all(e["run_id"] == branch_msg["run_id"] for e in per_run)
        agents = c.get(f"/v1/sessions/{sid}/agents").json()["items"]
        assert agents[0]["agent_type"] == "main"
        _error(c.get(f"/v1/sessions/{sid}/nodes/node_0000000000000000"), 404)
        _error(c.get(f"/v1/sessions/{sid}/nodes/bogus/context"), 404)
        _error(
            c.post(f"/v1/sessions/{sid}/switch_node", json={"node_id": "node_0000000000000000"}),
            404,
        )
        _error(c.post(f"/v1/sessions/{sid}/switch_node", json={}), 422)
        _error(c.get(f"/v1/sessions/{sid}/events", params={"after_seq": -1}), 422)


def _seed_artifact(gw: Gw, sid: str, path: str) -> str:
    return asyncio.run(seed_artifact(gw.redis_url, sid, path, size_bytes=5))


def test_files_and_artifacts(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        up = c.put(f"/v1/sessions/{sid}/files/input/data.csv", content=b"a,b\n1,2\n")
        assert up.status_code == 201 and up.json() == {"path": "input/data.csv", "size_bytes": 8}
        listed = c.get(f"/v1/sessions/{sid}/files", params={"area": "input"}).json()["items"]
        assert [f["path"] for f in listed] == ["input/data.csv"]
        got = c.get(f"/v1/sessions/{sid}/files/input/data.csv")
        assert got.content == b"a,b\n1,2\n" and got.headers["content-type"].startswith("text/csv")
        _error(c.put(f"/v1/sessions/{sid}/files/input/big.bin", content=b"x" * 300_000), 413)
        assert (
            c.get(f"/v1/sessions/{sid}/files", params={"area": "input"}).json()["items"] == listed
        )
        _error(
            c.put(f"/v1/sessions/{sid}/files/input/a%00b", content=b"x"), 400, "invalid_filename"
        )
        # One name, never a folder; no backslash (a name the file store cannot hold).
        for name in ("..%2F..%2Fescape", "%2F", "sub/dir.txt", "a%5Cb"):
            _error(
                c.put(f"/v1/sessions/{sid}/files/input/{name}", content=b"x"),
                400,
                "invalid_filename",
            )
        assert not (gw.stack.home / "accounts" / "dev" / "sessions" / "escape").exists()
        _error(c.get(f"/v1/sessions/{sid}/files/output/nothing.txt"), 404)
        _error(c.get(f"/v1/sessions/{sid}/files/scratchpad/x"), 404)
        _error(c.get(f"/v1/sessions/{sid}/files/output/%5C-%C3%BF"), 404)  # no file has it
        _error(c.get(f"/v1/sessions/{sid}/files/secrets/x"), 422)
        _error(c.get(f"/v1/sessions/{sid}/files/output/..%2F..%2F..%2Fetc%2Fpasswd"), 400)
        # An artifact in output/: listed, described and downloaded with its content type.
        ws = gw.stack.home / "accounts" / "dev" / "sessions" / sid
        (ws / "output" / "report.md").write_text("# hi\n")
        artifact_id = _seed_artifact(gw, sid, "output/report.md")
        items = c.get(f"/v1/sessions/{sid}/artifacts").json()["items"]
        assert [a["artifact_id"] for a in items] == [artifact_id]
        assert (
            c.get(f"/v1/sessions/{sid}/artifacts/{artifact_id}").json()["path"]
            == "output/report.md"
        )
        content = c.get(f"/v1/sessions/{sid}/artifacts/{artifact_id}/content")
        assert content.content == b"# hi\n" and content.headers["content-type"].startswith(
            "text/markdown"
        )
        assert c.get(f"/v1/sessions/{sid}/files/output/report.md").content == b"# hi\n"
        # Every area by default (uploads included), by area then path; one area when asked.
        assert [f["path"] for f in c.get(f"/v1/sessions/{sid}/files").json()["items"]] == [
            "input/data.csv",
            "output/report.md",
        ]
        only = c.get(f"/v1/sessions/{sid}/files", params={"area": "output"}).json()["items"]
        assert [f["path"] for f in only] == ["output/report.md"]
        every = c.get(f"/v1/sessions/{sid}/files", params={"area": "all"}).json()["items"]
        assert [f["path"] for f in every] == ["input/data.csv", "output/report.md"]
        _error(c.get(f"/v1/sessions/{sid}/artifacts/artifact_0000000000000000"), 404)
        _error(c.get(f"/v1/sessions/{sid}/artifacts/artifact_0000000000000000/content"), 404)
        # A symlink planted in output/ cannot lead out of the workspace.
        (ws / "output" / "escape").symlink_to("/etc/passwd")
        _error(c.get(f"/v1/sessions/{sid}/files/output/escape"), 400)


def test_files_listed_with_iso_times_and_uploaded_as_a_form(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        assert c.get(f"/v1/sessions/{sid}/files").json() == {"items": []}
        before = datetime.now(UTC).replace(microsecond=0)
        # What people try first: a multipart form (curl -F), one or more "file" parts.
        form = c.post(
            f"/v1/sessions/{sid}/files",
            files=[("file", ("a.csv", b"x,y\n", "text/csv")), ("file", ("b.txt", b"hi", None))],
        )
        assert form.status_code == 201, form.text
        assert form.json() == {
            "items": [
                {"path": "input/a.csv", "size_bytes": 4},
                {"path": "input/b.txt", "size_bytes": 2},
            ]
        }
        listed = c.get(f"/v1/sessions/{sid}/files").json()["items"]
        assert [(f["path"], f["size_bytes"]) for f in listed] == [
            ("input/a.csv", 4),
            ("input/b.txt", 2),
        ]
        for entry in listed:  # ISO 8601 with its zone, not an epoch float
            assert isinstance(entry["modified_at"], str)
            assert datetime.fromisoformat(entry["modified_at"]) >= before
        assert c.get(f"/v1/sessions/{sid}/files/input/b.txt").content == b"hi"
        _error(c.post(f"/v1/sessions/{sid}/files", json={"file": "x"}), 415)
        _error(
            c.post(f"/v1/sessions/{sid}/files", files=[("other", ("c.txt", b"x", None))]),
            400,
            "invalid_form",
        )
        _error(
            c.post(f"/v1/sessions/{sid}/files", files=[("file", ("../up.txt", b"x", None))]),
            400,
            "invalid_filename",
        )
        big = [("file", ("big.bin", b"x" * 300_000, None))]
        _error(c.post(f"/v1/sessions/{sid}/files", files=big), 413)
        assert [f["path"] for f in c.get(f"/v1/sessions/{sid}/files").json()["items"]] == [
            "input/a.csv",
            "input/b.txt",
        ]


def test_sse_stream_cap_per_key(gw: Gw) -> None:
    with gw.client() as c:
        sid = _ask_session(c)
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "hold"}).json()["run_id"]
        url = f"{gw.stack.gateway_url}/v1/sessions/{sid}/runs/{run_id}/events"
        headers = {"Authorization": f"Bearer {gw.key_b}"}
        # Bob's key cannot even see the run; his streams are counted apart from A's.
        assert httpx.get(url, headers=headers).status_code == 404
        clients = [gw.client() for _ in range(7)]
        opened = []
        try:
            for client in clients[:6]:
                stream = client.stream("GET", url, params={"keepalive_s": 5})
                response = stream.__enter__()
                assert response.status_code == 200
                opened.append(stream)
            refused = clients[6].get(url)
            err = _error(refused, 429, "too_many_streams")
            assert err["details"] == {"limit": 6} and refused.headers["retry-after"]
        finally:
            for stream in opened:
                stream.__exit__(None, None, None)
            for client in clients:
                client.close()
        # Closed streams give their slots back.
        deadline = time.monotonic() + 10
        while True:
            with gw.client() as again, again.stream("GET", url, params={"keepalive_s": 5}) as r:
                if r.status_code == 200:
                    break
            assert time.monotonic() < deadline, "slots were not released"
            time.sleep(0.2)
        c.post(f"/v1/sessions/{sid}/runs/{run_id}/cancel", params={"wait": "true"})


def test_metrics_and_health(gw: Gw) -> None:
    assert httpx.get(f"{gw.stack.gateway_url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{gw.stack.gateway_url}/readyz").status_code == 200
    # Metrics are the operator's: on the ops port, not on the API port clients reach.
    assert httpx.get(f"{gw.stack.gateway_url}/metrics").status_code == 404
    ops = json.loads((gw.stack.home / "run" / "stack.json").read_text())["ops"]
    text = httpx.get(f"{ops['gateway']}/metrics").text
    assert 'soong_gateway_requests_total{method="GET",route="/healthz",status="200"}' in text
    assert "soong_gateway_request_duration_seconds_bucket" in text
    assert "soong_runs_submitted_total" in text and "soong_sse_streams_open" in text
    assert "/v1/sessions/sess_" not in text  # route templates, never raw paths


def test_messages_hand_back_artifacts_of_their_session_only(gw: Gw) -> None:
    """``artifact_ref`` in a message: the session's own artifact is taken (stored with its file
    name); another session's, another account's or an unknown one is a 422. An image for a model
    that takes none (the demo model) is refused before any run exists."""
    with gw.client() as c, gw.client(gw.key_b) as b:
        sid, other = new_session(c), new_session(c)
        theirs = new_session(b)
        mine = _seed_artifact(gw, sid, "output/report.md")
        elsewhere = _seed_artifact(gw, other, "output/report.md")
        foreign = _seed_artifact(gw, theirs, "output/report.md")

        def post(blocks: list[dict[str, object]], key: httpx.Client = c) -> httpx.Response:
            return key.post(f"/v1/sessions/{sid}/messages", json={"content": blocks})

        for artifact_id in (elsewhere, foreign, "artifact_0123456789abcdef", "not-an-id"):
            refused = post([{"type": "artifact_ref", "artifact_id": artifact_id}])
            _error(refused, 422, "invalid_artifact_ref")
        image = {"type": "attachment", "path": "input/chart.png", "mime_type": "image/png"}
        error = _error(post([image]), 422, "attachment_not_accepted")
        assert "image" in str(error["message"]) and error["details"]["accepts"] == []  # type: ignore[index]
        assert c.get(f"/v1/sessions/{sid}/runs").json()["items"] == []  # nothing was queued

        accepted = post(
            [{"type": "text", "text": "again"}, {"type": "artifact_ref", "artifact_id": mine}]
        )
        assert accepted.status_code == 202, accepted.text
        read_events(c, accepted.json()["events_url"])  # the message is placed when its run starts
        node = c.get(f"/v1/sessions/{sid}/nodes/{accepted.json()['node_id']}").json()
        assert node["content"][1] == {
            "type": "artifact_ref",
            "artifact_id": mine,
            "filename": "report.md",
            "mime_type": "text/markdown",
            "summary": None,
        }


def test_offloaded_json_artifacts_are_downloadable(gw: Gw) -> None:
    """The storage-writer moves a large JSON block out of its row: the artifact row holds the
    object's store key (no host path), and the gateway serves it like any other artifact."""
    with gw.client() as c:
        session = c.post("/v1/sessions", json={}).json()
        sid = session["session_id"]
        data = {"rows": list(range(20_000))}  # over the default 64 KiB threshold
        artifact_id = asyncio.run(
            seed_offloaded_json(gw.redis_url, sid, session["root_agent_id"], data)
        )
        ref = c.get(f"/v1/sessions/{sid}/artifacts/{artifact_id}").json()
        assert ref["path"] == f"artifacts/{sid}/{artifact_id}.json"
        got = c.get(f"/v1/sessions/{sid}/artifacts/{artifact_id}/content")
        assert got.status_code == 200, got.text
        assert got.headers["content-type"].startswith("application/json")
        assert json.loads(got.content) == data
        _error(
            c.get(
                f"/v1/sessions/{sid}/artifacts/{artifact_id}/content",
                headers={"Authorization": f"Bearer {gw.key_b}"},
            ),
            404,
        )
