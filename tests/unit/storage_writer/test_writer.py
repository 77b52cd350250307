"""The writer on real SQLite files: atomic node+event, idempotency, fencing, transitions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_core.bus.contracts.storage import (
    ClaimRun,
    CreateRun,
    CreateSession,
    GetActivePath,
    GetArtifact,
    GetRun,
    GetSession,
    ListEvents,
    RunFence,
    SwitchActiveNode,
    UpdateRun,
    UpdateSession,
)
from agent_core.ids import new_id
from agent_core.types.enums import AgentType, EndReason, RunStatus, SessionStatus
from agent_core.types.protocol import JsonBlock, TextBlock
from agent_core.types.runtime import SESSION_CONFIG_KEY
from services.storage_writer.queries import QueryEngine
from services.storage_writer.schema import events_table, nodes_table
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.conftest import open_engine, read_rows
from tests.unit.storage_writer.factories import (
    append_node,
    claim_run,
    create_run,
    create_session,
    end_run,
)


def _rows(writer: Writer, session_id: str, table: str) -> list[tuple[Any, ...]]:
    return read_rows(writer, session_id, f"SELECT * FROM {table}")


def test_create_session_then_nodes_get_gap_free_seqs(writer: Writer) -> None:
    s = create_session()
    [r] = writer.apply_batch([s])
    assert r.ok and r.result["seq"] == 1
    first = append_node(s)
    receipts = writer.apply_batch([first, *[append_node(s) for _ in range(9)]])
    assert [r.result["node_seq"] for r in receipts] == list(range(1, 11))
    assert [r.result["seq"] for r in receipts] == list(range(2, 12))


def test_failure_between_node_and_event_leaves_neither(writer: Writer) -> None:
    s = create_session()
    writer.apply_batch([s])

    def fault(point: str) -> None:
        if point == "between_node_and_event":
            raise RuntimeError("injected")

    writer.fault = fault
    with pytest.raises(RuntimeError, match="injected"):
        writer.apply_batch([append_node(s)])
    writer.fault = None
    assert _rows(writer, s.session_id, nodes_table(s.session_id)) == []
    assert len(_rows(writer, s.session_id, events_table(s.session_id))) == 1  # session_created
    [again] = writer.apply_batch([append_node(s)])
    assert again.result["node_seq"] == 1 and again.result["seq"] == 2


def test_same_command_three_times_is_one_row_with_the_same_seq(writer: Writer) -> None:
    s = create_session()
    writer.apply_batch([s])
    cmd = append_node(s)
    a, b = writer.apply_batch([cmd, cmd])
    [c] = writer.apply_batch([cmd])
    assert (a.duplicate, b.duplicate, c.duplicate) == (False, True, True)
    assert a.result == b.result == c.result
    assert len(_rows(writer, s.session_id, nodes_table(s.session_id))) == 1


def test_refused_command_fails_alone_and_changes_nothing(writer: Writer) -> None:
    s = create_session()
    writer.apply_batch([s])
    good1, bad, good2 = append_node(s), append_node(s, parent_id="node_missing"), append_node(s)
    r1, r2, r3 = writer.apply_batch([good1, bad, good2])
    assert r1.ok and r3.ok and not r2.ok
    assert r2.error is not None and r2.error.code == "parent_not_found"
    assert (r1.result["node_seq"], r3.result["node_seq"]) == (1, 2)


def test_stale_attempt_is_refused_without_row_changes(writer: Writer) -> None:
    s = create_session()
    run = create_run(s)
    writer.apply_batch([s, run])
    claim = lambda n: claim_run(s, run.run_id, n)  # noqa: E731
    assert writer.apply_batch([claim(1)])[0].ok
    assert writer.apply_batch([claim(2)])[0].ok  # takeover
    stale = append_node(s, run_id=run.run_id, fence=RunFence(run_id=run.run_id, attempt=1))
    [r] = writer.apply_batch([stale])
    assert not r.ok and r.error is not None and r.error.code == "stale_attempt"
    assert _rows(writer, s.session_id, nodes_table(s.session_id)) == []
    [r] = writer.apply_batch([claim(2)])
    assert r.error is not None and r.error.code == "stale_attempt"
    fresh = append_node(s, run_id=run.run_id, fence=RunFence(run_id=run.run_id, attempt=2))
    [r] = writer.apply_batch([fresh])
    assert r.ok and r.result["run_seq"] == 4  # after run_queued and two attempts' run_started


def test_terminal_run_never_changes(writer: Writer) -> None:
    s = create_session()
    run = create_run(s)
    writer.apply_batch([s, run])

    def update(status: RunStatus) -> UpdateRun:
        return UpdateRun(
            command_id=new_id("cmd"), session_id=s.session_id, run_id=run.run_id, status=status
        )

    [r] = writer.apply_batch([update(RunStatus.RUNNING)])
    assert r.error is not None and r.error.code == "invalid_transition"
    cancel = end_run(
        s, run.run_id, attempt=None, status=RunStatus.CANCELLED, reason=EndReason.ABORTED_STREAMING
    )
    assert writer.apply_batch([cancel])[0].ok
    for status in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.COMPLETED):
        [r] = writer.apply_batch([update(status)])
        assert r.error is not None and r.error.code == "invalid_transition"


@pytest.mark.parametrize(
    "hostile",
    [
        'sess_20260101_000000_abcd"; DROP TABLE sessions; --',
        "sess_20260101_000000_abcd OR 1=1",
        "nodes_x",
        "sess_20260101_000000_аbcd",  # Cyrillic а
        "../../etc",
    ],
)
def test_hostile_session_ids_never_reach_sql(sqlite_writer: Writer, hostile: str) -> None:
    # Refused before any connection is chosen (Writer._shard), so on either backend; SQLite's
    # trace callback shows that no statement named it.
    writer, engine = sqlite_writer, QueryEngine(sqlite_writer.layout)
    statements: list[str] = []
    s = create_session().model_copy(update={"session_id": hostile})
    for shard in range(writer.layout.shard_count):
        writer._conn(shard).set_trace_callback(statements.append)
    [r] = writer.apply_batch([s])
    assert not r.ok and r.error is not None
    assert r.error.code in ("invalid_session_id", "invalid_identifier")
    assert not any(hostile in st for st in statements)
    assert engine.answer(GetSession(session_id=hostile)).data is None
    engine.close()


def test_large_json_becomes_an_artifact(writer: Writer, engine: QueryEngine) -> None:
    s = create_session()
    big = {"rows": list(range(2000))}
    cmd = append_node(s, content=[JsonBlock(data=big)])
    [_, r] = writer.apply_batch([s, cmd])
    [artifact_id] = r.result["artifact_ids"]
    node = engine.answer(GetActivePath(session_id=s.session_id)).data[-1]
    assert artifact_id in node["content_json"] and "1999" not in node["content_json"]
    path = writer.data_dir / s.session_id / f"{artifact_id}.json"
    assert path.read_text().startswith('{"rows":[0,1,2')
    # The row names the object by its store key, never by the writer's host path.
    row = engine.answer(
        GetArtifact(artifact_id=artifact_id, session_id=s.session_id, account_id=s.account_id)
    ).data
    assert row["path"] == f"artifacts/{s.session_id}/{artifact_id}.json"


def test_queries_are_account_scoped_and_follow_the_active_path(
    writer: Writer, engine: QueryEngine
) -> None:
    s = create_session(account="acct_a")
    root = append_node(s)
    left = append_node(s, parent_id=root.node.node_id)
    right = append_node(s, parent_id=root.node.node_id)
    writer.apply_batch([s, root, left, right])
    path = engine.answer(GetActivePath(session_id=s.session_id)).data
    assert [n["node_id"] for n in path] == [root.node.node_id, right.node.node_id]
    switch = SwitchActiveNode(
        command_id=new_id("cmd"), session_id=s.session_id, node_id=left.node.node_id
    )
    assert writer.apply_batch([switch])[0].ok
    path = engine.answer(GetActivePath(session_id=s.session_id, account_id="acct_a")).data
    assert [n["node_id"] for n in path] == [root.node.node_id, left.node.node_id]
    assert engine.answer(GetActivePath(session_id=s.session_id, account_id="acct_b")).data is None
    events = engine.answer(ListEvents(session_id=s.session_id, after_seq=1)).data
    assert [e["seq"] for e in events] == [2, 3, 4, 5]  # the nodes', then the switch's
    assert events[-1]["event_type"] == "active_node_switched"


def test_active_path_after_a_known_node_returns_only_what_follows_it(
    writer: Writer, engine: QueryEngine
) -> None:
    s = create_session()
    a = append_node(s)
    b = append_node(s, parent_id=a.node.node_id)
    c = append_node(s, parent_id=b.node.node_id)
    side = append_node(s, parent_id=a.node.node_id, set_active=False)
    writer.apply_batch([s, a, b, c, side])

    def ids(**kw: Any) -> list[str] | None:
        rows = engine.answer(GetActivePath(session_id=s.session_id, **kw)).data
        return None if rows is None else [n["node_id"] for n in rows]

    all_ids = [a.node.node_id, b.node.node_id, c.node.node_id]
    assert ids() == all_ids
    assert ids(after_node_id=a.node.node_id) == all_ids[1:]  # first one's parent is a
    assert ids(after_node_id=c.node.node_id) == []  # the tip itself: nothing new
    # Not on the path (a side branch) or unknown: the whole path, from the root.
    assert ids(after_node_id=side.node.node_id) == all_ids
    assert ids(after_node_id="node_unknown") == all_ids
    # A missing tip stays a miss, whatever the reader holds.
    assert ids(node_id="node_missing", after_node_id="node_missing") is None


def test_create_run_checks_the_account_and_defaults_to_the_root_agent(writer: Writer) -> None:
    s = create_session(account="acct_a")
    writer.apply_batch([s])

    def run(**kw: Any) -> Any:
        cmd = CreateRun(
            command_id=new_id("cmd"), session_id=s.session_id, run_id=new_id("run"), **kw
        )
        [receipt] = writer.apply_batch([cmd])
        return receipt

    mine = run(account_id="acct_a")
    assert mine.ok and mine.result["agent_id"] == s.root_agent_id
    theirs = run(account_id="acct_b")
    assert not theirs.ok and theirs.error.code == "session_not_found"
    unknown = run(account_id="acct_a", agent_id="agent_nobody")
    assert not unknown.ok and unknown.error.code == "agent_not_found"
    assert run().ok  # trusted callers (workers) name no account


def test_a_create_run_past_its_expiry_writes_nothing_and_a_timely_one_repeats(
    writer: Writer,
) -> None:
    s = create_session()
    writer.apply_batch([s])
    past = datetime.now(UTC) - timedelta(seconds=1)
    late = create_run(s).model_copy(update={"expires_at": past})
    [refused] = writer.apply_batch([late])
    assert not refused.ok and refused.error is not None and refused.error.code == "expired"
    assert _rows(writer, s.session_id, "runs") == []
    # Applied in time, the same command repeated after its expiry still gets its receipt.
    timely = create_run(s).model_copy(
        update={"expires_at": datetime.now(UTC) + timedelta(seconds=30)}
    )
    [first] = writer.apply_batch([timely])
    assert first.ok
    repeat = timely.model_copy(update={"expires_at": past})
    [again] = writer.apply_batch([repeat])
    assert again.ok and again.result["run_id"] == first.result["run_id"]
    assert len(_rows(writer, s.session_id, "runs")) == 1


def test_create_run_returns_the_session_config_and_refuses_an_archived_session(
    writer: Writer,
) -> None:
    plain, configured, odd = create_session(), create_session(), create_session()
    writer.apply_batch([plain, configured, odd])
    config = {"max_turns": 3, "tool_policy": {"ask": ["lookup"]}}
    writer.apply_batch(
        [
            UpdateSession(
                command_id=new_id("cmd"),
                session_id=configured.session_id,
                metadata={"title": "t", SESSION_CONFIG_KEY: config},
            ),
            # Not an object (never written by the API): no config rather than a failed command.
            UpdateSession(
                command_id=new_id("cmd"),
                session_id=odd.session_id,
                metadata={SESSION_CONFIG_KEY: "x"},
            ),
        ]
    )
    receipts = writer.apply_batch([create_run(plain), create_run(configured), create_run(odd)])
    assert all(r.ok for r in receipts)
    assert "session_config" not in receipts[0].result
    assert receipts[0].result["cwd"] == plain.cwd  # fixed at creation: carried by the run
    assert receipts[1].result["session_config"] == config
    assert "session_config" not in receipts[2].result

    archive = UpdateSession(
        command_id=new_id("cmd"), session_id=plain.session_id, status=SessionStatus.ARCHIVED
    )
    writer.apply_batch([archive])
    runs_before = _rows(writer, plain.session_id, "runs")
    [refused] = writer.apply_batch([create_run(plain)])
    assert not refused.ok and refused.error is not None
    assert refused.error.code == "session_archived"
    assert _rows(writer, plain.session_id, "runs") == runs_before


def _receipt_ids(writer: Writer, session_id: str) -> set[str]:
    return {row[0] for row in _rows(writer, session_id, "command_receipts")}


def test_a_created_run_is_its_own_receipt(writer: Writer) -> None:
    s = create_session()
    writer.apply_batch([s])
    cmd = create_run(s).model_copy(update={"start_node_id": new_id("node")})
    [first] = writer.apply_batch([cmd])
    assert first.ok and first.result["status"] == "queued"
    assert cmd.command_id not in _receipt_ids(writer, s.session_id)
    # Redelivered later (even once the session is archived) and twice in one batch: the first
    # result, one run row.
    writer.apply_batch(
        [
            UpdateSession(
                command_id=new_id("cmd"), session_id=s.session_id, status=SessionStatus.ARCHIVED
            )
        ]
    )
    [again] = writer.apply_batch([cmd])
    twice = writer.apply_batch([cmd, cmd])
    assert again.ok and again.duplicate and again.result == first.result
    assert [(r.duplicate, r.result) for r in twice] == [(True, first.result)] * 2
    assert len(_rows(writer, s.session_id, "runs")) == 1
    # Another command reusing the run id (other start node) is a conflict, not a duplicate.
    clash = cmd.model_copy(update={"command_id": new_id("cmd"), "start_node_id": new_id("node")})
    [refused] = writer.apply_batch([clash])
    assert not refused.ok and refused.error is not None and refused.error.code == "conflict"
    # A run without a start node (a child's) is not told apart by its row: it keeps a receipt,
    # and another command reusing its id is a conflict too.
    child = create_run(s)
    writer.apply_batch(
        [
            UpdateSession(
                command_id=new_id("cmd"), session_id=s.session_id, status=SessionStatus.ACTIVE
            )
        ]
    )
    [made] = writer.apply_batch([child])
    assert made.ok and child.command_id in _receipt_ids(writer, s.session_id)
    [reused] = writer.apply_batch([child.model_copy(update={"command_id": new_id("cmd")})])
    assert not reused.ok and reused.error is not None and reused.error.code == "conflict"


def test_a_plain_node_is_its_own_receipt(writer: Writer) -> None:
    s = create_session()
    writer.apply_batch([s])
    first = append_node(s)
    [applied] = writer.apply_batch([first])
    receipts_before = _rows(writer, s.session_id, "command_receipts")
    # Redelivered alone and twice within one batch: the first result, nothing written again.
    [again] = writer.apply_batch([first])
    twice = writer.apply_batch([first, first])
    assert again.duplicate and again.result == applied.result
    assert [r.duplicate for r in twice] == [True, True]
    assert all(r.result == applied.result for r in twice)
    assert len(_rows(writer, s.session_id, nodes_table(s.session_id))) == 1
    assert _rows(writer, s.session_id, "command_receipts") == receipts_before  # none stored
    # Another command reusing the node's id is a conflict, not a duplicate.
    other = append_node(s)
    other = other.model_copy(
        update={"node": other.node.model_copy(update={"node_id": first.node.node_id})}
    )
    [clash] = writer.apply_batch([other])
    assert not clash.ok and clash.error is not None and clash.error.code == "conflict"


def test_a_claim_places_the_runs_message_under_the_active_node_of_that_moment(
    writer: Writer,
) -> None:
    s = create_session()
    earlier = append_node(s)
    run = create_run(s)
    writer.apply_batch([s, earlier, run])
    message = append_node(s, run_id=run.run_id)  # its parent_id is None: "the active node"

    first = claim_run(s, run.run_id, place=message)
    [claimed] = writer.apply_batch([first])
    assert claimed.ok, claimed.error
    placed = claimed.result["placed"]
    assert placed["node_id"] == message.node.node_id and placed["node_seq"] == 2
    assert placed["parent_id"] == earlier.node.node_id
    # Repeated, the claim gets its first result back from the run row and the placed node (it
    # stores no receipt); another claim naming the same attempt is refused, not taken for it.
    [again] = writer.apply_batch([first])
    assert again.duplicate and again.result == claimed.result
    assert first.command_id not in _receipt_ids(writer, s.session_id)
    rival = first.model_copy(update={"command_id": new_id("cmd"), "place": None})
    [refused] = writer.apply_batch([rival])
    assert not refused.ok and refused.error is not None
    assert refused.error.code == "stale_attempt"
    # The same command id naming another attempt is not a repeat either.
    other_attempt = first.model_copy(
        update={"fence": RunFence(run_id=run.run_id, attempt=2), "place": None}
    )
    [odd] = writer.apply_batch([other_attempt])
    assert odd.ok and not odd.duplicate and odd.result["attempt"] == 2
    engine = open_engine(writer)
    try:
        session = engine.answer(GetSession(session_id=s.session_id)).data
        path = engine.answer(GetActivePath(session_id=s.session_id)).data
    finally:
        engine.close()
    assert session["active_node_id"] == message.node.node_id
    assert [n["node_id"] for n in path] == [earlier.node.node_id, message.node.node_id]

    # A given parent that is not a node of the session: the claim stands, nothing is placed.
    other = create_run(s)
    writer.apply_batch([other])
    lost = append_node(s, run_id=other.run_id, parent_id="node_nowhere")
    lost_claim = claim_run(s, other.run_id, place=lost)
    [unplaced] = writer.apply_batch([lost_claim])
    assert unplaced.ok and unplaced.result["placed"] is None
    assert unplaced.result["place_error"] == "parent_not_found"
    [unplaced_again] = writer.apply_batch([lost_claim])
    assert unplaced_again.duplicate and unplaced_again.result == unplaced.result
    assert len(_rows(writer, s.session_id, nodes_table(s.session_id))) == 2
    # The worker then appends the message itself (same node, its own event): a later repeat of
    # the claim still says it placed nothing.
    by_worker = append_node(s, run_id=other.run_id)  # a new event, the message's node
    by_worker = by_worker.model_copy(
        update={"node": lost.node.model_copy(update={"parent_id": None})}
    )
    [appended] = writer.apply_batch([by_worker])
    assert appended.ok and appended.result["node_id"] == lost.node.node_id
    [late] = writer.apply_batch([lost_claim])
    assert late.duplicate and late.result == unplaced.result


def test_a_claim_that_places_the_message_returns_the_path_to_it(writer: Writer) -> None:
    """``return_path``: the claim's result holds the path to the placed message, as
    ``get_active_path`` answers for it — whole, or only after a node the worker holds; a repeated
    claim gets the same path; an unplaced message has none."""
    s = create_session()
    writer.apply_batch([s])
    first = append_node(s)
    writer.apply_batch([first])
    second = append_node(s, parent_id=first.node.node_id)
    writer.apply_batch([second])

    def claim(after: str | None) -> tuple[ClaimRun, Any]:
        run = create_run(s)
        writer.apply_batch([run])
        message = append_node(s, run_id=run.run_id)
        command = claim_run(
            s, run.run_id, place=message, return_path=True, path_after_node_id=after
        )
        [receipt] = writer.apply_batch([command])
        assert receipt.ok, receipt.error
        return command, receipt

    whole_claim, whole = claim(None)
    engine = open_engine(writer)
    try:
        full = engine.answer(GetActivePath(session_id=s.session_id)).data
    finally:
        engine.close()
    assert whole.result["path"] == full
    message_id = whole_claim.place.node.node_id if whole_claim.place else ""
    assert [n["node_id"] for n in full] == [first.node.node_id, second.node.node_id, message_id]
    [again] = writer.apply_batch([whole_claim])
    assert again.duplicate and again.result == whole.result
    # The worker holds the path up to the last message: only the new one comes back.
    _, tail = claim(message_id)
    assert [n["parent_id"] for n in tail.result["path"]] == [message_id]
    # Without return_path (an older worker), no path.
    run = create_run(s)
    writer.apply_batch([run])
    message = append_node(s, run_id=run.run_id)
    plain = claim_run(s, run.run_id, place=message)
    [receipt] = writer.apply_batch([plain])
    assert receipt.ok and "path" not in receipt.result
    # Unplaced (a given parent that is not a node of the session): no path either.
    run = create_run(s)
    writer.apply_batch([run])
    lost = append_node(s, run_id=run.run_id, parent_id="node_nowhere")
    [unplaced] = writer.apply_batch([claim_run(s, run.run_id, place=lost, return_path=True)])
    assert unplaced.ok and unplaced.result["placed"] is None and "path" not in unplaced.result


def test_a_runs_message_is_stored_once_the_claim_has_placed_it(writer: Writer) -> None:
    s = create_session()
    writer.apply_batch([s])
    message = [{"type": "text", "text": "hello"}]
    waiting, started = (
        create_run(s).model_copy(update={"metadata": {"kind": "main", "message": message}})
        for _ in range(2)
    )
    writer.apply_batch([waiting, started])
    node = append_node(s, run_id=started.run_id)
    [claimed] = writer.apply_batch([claim_run(s, started.run_id, place=node)])
    assert claimed.ok and claimed.result["placed"]["node_id"] == node.node.node_id
    engine = open_engine(writer)
    try:
        runs = {
            r.run_id: engine.answer(GetRun(run_id=r.run_id, session_id=s.session_id)).data
            for r in (waiting, started)
        }
    finally:
        engine.close()
    # The queued run still holds its message (its only durable copy); the started one's is
    # its node now.
    assert json.loads(runs[waiting.run_id]["metadata_json"]) == {"kind": "main", "message": message}
    assert json.loads(runs[started.run_id]["metadata_json"]) == {"kind": "main"}


def test_a_session_in_orchestrator_mode_has_an_orchestrator_root(writer: Writer) -> None:
    plain = create_session()
    orchestrated = create_session().model_copy(update={"root_agent_type": AgentType.ORCHESTRATOR})
    writer.apply_batch([plain, orchestrated])
    runs = [create_run(plain), create_run(orchestrated)]
    receipts = writer.apply_batch(runs)
    assert [r.result["agent_type"] for r in receipts] == ["main", "orchestrator"]
    # Read back the same when the command is repeated (no receipt is stored for it).
    again = writer.apply_batch(runs)
    assert [r.result for r in again] == [r.result for r in receipts]
    assert all(r.duplicate for r in again)
    for session, expected in ((plain, "main"), (orchestrated, "orchestrator")):
        types = {row[0]: row[3] for row in _rows(writer, session.session_id, "agents")}
        assert types[session.root_agent_id] == expected
    with pytest.raises(ValueError):  # only the two root types exist
        CreateSession.model_validate({**plain.model_dump(), "root_agent_type": "sub"})


def test_numbers_beyond_sqlite_integers_are_refused_at_the_boundary() -> None:
    with pytest.raises(ValueError):
        RunFence(run_id="run_0000000000000001", attempt=2**63)
    assert RunFence(run_id="run_0000000000000001", attempt=2**63 - 1).attempt == 2**63 - 1


def test_a_full_disk_refuses_its_shard_with_storage_full_and_keeps_nothing(
    sqlite_writer: Writer,
) -> None:
    writer = sqlite_writer
    # SQLITE_FULL for real: the shard's database may not grow past the pages it has.
    full, other = create_session(), create_session()
    while writer.layout.shard_of(other.session_id) == writer.layout.shard_of(full.session_id):
        other = create_session()
    writer.apply_batch([full, other])
    conn = writer._conn(writer.layout.shard_of(full.session_id))
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages}")
    big = append_node(full, content=[TextBlock(text="x" * 200_000)])
    refused, applied = writer.apply_batch([big, append_node(other)])
    assert not refused.ok and refused.error is not None
    assert (refused.error.code, refused.error.retryable) == ("storage_full", True)
    assert applied.ok  # the other shard's commands go on
    assert _rows(writer, full.session_id, nodes_table(full.session_id)) == []
    conn.execute("PRAGMA max_page_count=1073741823")  # space returns
    [again] = writer.apply_batch([big])
    assert again.ok and not again.duplicate and again.result["node_seq"] == 1
