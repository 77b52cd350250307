"""Manual compaction over HTTP: ``POST …/compact`` runs like a message, leaves a ``compaction``
node in the tree and a ``context_compacted`` event on the timeline; the covered nodes stay
readable, a context built before the compaction is the full one and one after uses it."""

from __future__ import annotations

import pytest

from tests.e2e.gateway.conftest import Gw, new_session, read_events, run_message

pytestmark = pytest.mark.e2e


def test_compact_leaves_a_compaction_node_and_keeps_the_history(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        _, first_events = run_message(c, sid, "first question")
        run_message(c, sid, "second question")
        tree = c.get(f"/v1/sessions/{sid}/tree").json()
        before = [n["node_id"] for n in tree["nodes"]]
        answer_before = tree["active_node_id"]

        accepted = c.post(f"/v1/sessions/{sid}/compact")
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["run_id"]
        events = read_events(c, f"/v1/sessions/{sid}/runs/{run_id}/events")
        finished = events[-1]
        assert finished.event == "run_finished" and finished.data is not None
        assert (finished.data["status"], finished.data["end_reason"]) == ("completed", "completed")

        tree = c.get(f"/v1/sessions/{sid}/tree").json()
        (compaction,) = [n for n in tree["nodes"] if n["node_type"] == "compaction"]
        ids = [n["node_id"] for n in tree["nodes"]]
        assert set(before) <= set(ids), "no node was removed"
        node = c.get(f"/v1/sessions/{sid}/nodes/{compaction['node_id']}").json()
        assert node["metadata"]["purpose"] == "compact"
        assert node["metadata"]["trigger"] == "manual" and node["metadata"]["method"] == "summary"
        agents = c.get(f"/v1/sessions/{sid}/agents").json()["items"]
        (writer,) = [a for a in agents if a["metadata"].get("purpose") == "compact"]
        assert writer["agent_id"] == node["metadata"]["compact_agent_id"]
        assert (writer["agent_type"], writer["status"]) == ("sub", "completed")
        assert writer["created_by_run_id"] == run_id
        for covered in before:  # every covered node is still readable
            assert c.get(f"/v1/sessions/{sid}/nodes/{covered}").status_code == 200

        timeline = c.get(f"/v1/sessions/{sid}/events", params={"run_id": run_id}).json()
        (compacted,) = [e for e in timeline["items"] if e["event_type"] == "context_compacted"]
        assert compacted["node_id"] == compaction["node_id"] and compacted["payload"]["covered"] > 0

        # The context at the old answer is the full one; the context after uses the compaction.
        old = c.get(f"/v1/sessions/{sid}/nodes/{answer_before}/context").json()
        assert old["compaction_node_id"] is None and old["budget"]["total"] > 0
        assert first_events[0].data is not None
        run_message(c, sid, "third question")
        now = c.get(f"/v1/sessions/{sid}").json()["active_node_id"]
        new = c.get(f"/v1/sessions/{sid}/nodes/{now}/context").json()
        assert new["compaction_node_id"] == compaction["node_id"] and new["compacted"] > 0
        assert {d["reason"] for d in new["dropped"]} == {"compacted"}
