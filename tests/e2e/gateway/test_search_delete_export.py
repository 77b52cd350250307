"""Search (``GET /v1/sessions?q=``), delete (``DELETE /v1/sessions/{id}``), the account's audit
log and a session's JSON export, against the running stack."""

from __future__ import annotations

import httpx
import pytest

import soong_agent
from tests.e2e.gateway.conftest import Gw, new_session, read_events, run_message
from tests.e2e.gateway.test_api import _ask_session, _until_permission

pytestmark = pytest.mark.e2e


def _found(c: httpx.Client, q: str, **params: object) -> list[str]:
    response = c.get("/v1/sessions", params={"q": q, **params})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [m["session_id"] for m in body["matches"]] == [s["session_id"] for s in body["items"]]
    return [s["session_id"] for s in body["items"]]


def test_search_finds_sessions_by_title_and_by_message_text(gw: Gw) -> None:
    with gw.client() as c, gw.client(gw.key_b) as b:
        titled = new_session(c, metadata={"title": "Pelican migration notes"})
        talked = new_session(c)
        run_message(c, talked, "where do the flamingos winter")
        assert _found(c, "pelican") == [titled]
        assert _found(c, "FLAMINGOS") == [talked]  # the user's message text, case folded
        assert _found(c, "flamin") == [talked]  # the last word as a prefix
        assert _found(c, "pelican flamingos") == []  # every word must match
        assert _found(b, "pelican") == []  # another account's sessions are never found
        [match] = c.get("/v1/sessions", params={"q": "winter"}).json()["matches"]
        assert match["node_id"] and "[winter]" in match["snippet"]
        # A new title replaces the old one in the index; archived sessions filter by status.
        c.patch(f"/v1/sessions/{titled}", json={"metadata": {"title": "Heron notes"}})
        assert _found(c, "pelican") == [] and _found(c, "heron") == [titled]
        c.patch(f"/v1/sessions/{titled}", json={"status": "archived"})
        assert _found(c, "heron", status="active") == []
        assert _found(c, "heron", status="archived") == [titled]
        bad = c.get("/v1/sessions", params={"q": ""})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error"


def test_delete_removes_the_session_its_files_and_index_and_audits_it(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c, metadata={"title": "Ephemeral walrus"})
        run_message(c, sid, "walrus facts please")
        put = c.put(f"/v1/sessions/{sid}/files/input/notes.txt", content=b"walrus")
        assert put.status_code in (200, 201), put.text
        workspace = gw.stack.home / "accounts" / "dev" / "sessions" / sid
        offloaded = gw.stack.home / "artifacts" / sid  # the writer's own files of the session
        offloaded.mkdir(parents=True)
        (offloaded / "big.json").write_text("{}")
        assert (workspace / "input" / "notes.txt").exists()
        assert _found(c, "walrus") == [sid]

        other = gw.client(gw.key_b)
        assert other.delete(f"/v1/sessions/{sid}").status_code == 404  # not bob's to delete
        deleted = c.delete(f"/v1/sessions/{sid}")
        assert deleted.status_code == 200, deleted.text
        body = deleted.json()
        assert body["session_id"] == sid and body["runs"] == 1 and body["nodes"] >= 2

        assert c.get(f"/v1/sessions/{sid}").status_code == 404
        assert c.get(f"/v1/sessions/{sid}/tree").status_code == 404
        assert c.delete(f"/v1/sessions/{sid}").status_code == 404
        assert sid not in [s["session_id"] for s in c.get("/v1/sessions").json()["items"]]
        assert _found(c, "walrus") == []
        assert not workspace.exists() and not offloaded.exists()

        audit = c.get("/v1/audit").json()["items"]
        [event] = [e for e in audit if e["session_id"] == sid]
        assert event["event_type"] == "session_deleted"
        assert event["event_id"] == body["audit_event_id"]
        assert event["payload"]["title"] == "Ephemeral walrus"
        assert sid not in [e["session_id"] for e in other.get("/v1/audit").json()["items"]]
        other.close()


def test_delete_is_refused_while_a_run_is_active(gw: Gw) -> None:
    with gw.client() as c:
        sid = _ask_session(c)
        posted = c.post(f"/v1/sessions/{sid}/messages", json={"text": "ask me"}).json()
        _until_permission(c, sid, posted["run_id"])
        refused = c.delete(f"/v1/sessions/{sid}")
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "runs_active" and error["details"]["run_ids"] == [posted["run_id"]]
        assert c.get(f"/v1/sessions/{sid}").status_code == 200  # nothing was removed
        cancel = f"/v1/sessions/{sid}/runs/{posted['run_id']}/cancel"
        assert c.post(cancel, params={"wait": "true"}).status_code == 200
        assert c.delete(f"/v1/sessions/{sid}").status_code == 200
        assert c.get(f"/v1/sessions/{sid}").status_code == 404


def test_export_holds_the_session_its_tree_runs_events_and_artifacts(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c, metadata={"title": "Exported"})
        run_id, _ = run_message(c, sid, "first")
        # The first message replaced (a second root): the export holds every branch, not the path.
        replaced = c.post(
            f"/v1/sessions/{sid}/messages", json={"text": "other way", "parent_node_id": "root"}
        )
        assert replaced.status_code == 202, replaced.text
        runs = c.get(f"/v1/sessions/{sid}/runs").json()["items"]
        for run in runs:
            read_events(c, f"/v1/sessions/{sid}/runs/{run['run_id']}/events")
        export = c.get(f"/v1/sessions/{sid}/export")
        assert export.status_code == 200, export.text
        doc = export.json()
        assert doc["format"] == "soong-agent.session-export" and doc["version"] == 1
        assert (
            doc["session"]["session_id"] == sid
            and doc["session"]["metadata"]["title"] == "Exported"
        )
        full_tree = c.get(f"/v1/sessions/{sid}/tree").json()["nodes"]
        assert [n["node_id"] for n in doc["nodes"]] == [n["node_id"] for n in full_tree]
        assert any(b.get("text") == "other way" for n in doc["nodes"] for b in n["content"])
        assert {r["run_id"] for r in doc["runs"]} == {r["run_id"] for r in runs} >= {run_id}
        events = c.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).json()["items"]
        assert [e["event_id"] for e in doc["events"]] == [e["event_id"] for e in events]
        assert [a["agent_id"] for a in doc["agents"]] == [
            a["agent_id"] for a in c.get(f"/v1/sessions/{sid}/agents").json()["items"]
        ]
        assert doc["artifacts"] == c.get(f"/v1/sessions/{sid}/artifacts").json()["items"]
        assert (
            c.get(
                f"/v1/sessions/{sid}/export", headers={"Authorization": f"Bearer {gw.key_b}"}
            ).status_code
            == 404
        )


def test_the_sdk_searches_exports_reads_model_context_and_deletes(gw: Gw) -> None:
    with soong_agent.Client(gw.stack.gateway_url, gw.stack.api_key) as client:
        session = client.create_session(metadata={"title": "Capybara diary"})
        answer = session.send("capybaras bathe").final_text()
        found = client.search_sessions("capybara")
        assert [s.session_id for s in found.items] == [session.id]
        assert found.matches is not None and found.matches[0].snippet == "[capybaras] bathe"
        by_title = client.search_sessions("diary").matches
        assert by_title is not None and by_title[0].node_id is None
        exported = session.export()
        assert exported.session.session_id == session.id
        assert [n.node_id for n in exported.nodes] == [n.node_id for n in session.tree().nodes]
        last = exported.nodes[-1]
        context = session.model_context(last.node_id)
        assert context.produced_by_model and context.built_from_node_id == last.parent_id
        said = [b.text for m in context.request.messages for b in m.content if b.type == "text"]
        assert "capybaras bathe" in said and answer not in said
        deleted = session.delete()
        assert deleted.session_id == session.id and deleted.runs == 1
        with pytest.raises(soong_agent.NotFoundError):
            session.get()
        assert any(e.session_id == session.id for e in client.audit().items)


def test_a_permission_allowed_with_edited_arguments_runs_them(gw: Gw) -> None:
    with gw.client() as c:
        sid = _ask_session(c)
        posted = c.post(f"/v1/sessions/{sid}/messages", json={"text": "ask me"}).json()
        request_id = _until_permission(c, sid, posted["run_id"])
        [pending] = c.get(f"/v1/sessions/{sid}/permissions").json()["items"]
        assert pending["input_schema"]["properties"]["q"]["type"] == "string"
        decide = f"/v1/sessions/{sid}/permissions/{request_id}"
        bad = c.post(decide, json={"behavior": "allow", "arguments": {"q": 5}})
        assert bad.status_code == 422, bad.text
        assert bad.json()["error"]["code"] == "invalid_arguments"
        assert bad.json()["error"]["details"]["errors"][0]["field"] == "q"
        ok = c.post(decide, json={"behavior": "allow", "arguments": {"q": "edited query"}})
        assert ok.status_code == 200 and ok.json()["arguments"] == {"q": "edited query"}
        read_events(c, f"/v1/sessions/{sid}/runs/{posted['run_id']}/events")
        events = c.get(
            f"/v1/sessions/{sid}/events", params={"run_id": posted["run_id"], "limit": 1000}
        ).json()["items"]
        [decided] = [e for e in events if e["event_type"] == "permission_decided"]
        assert decided["payload"]["arguments"] == {"q": "edited query"}
        assert not [e for e in events if e["event_type"] == "tool_failed"]  # they fit: it ran
