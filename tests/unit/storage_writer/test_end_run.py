"""A run's end is one command: the run row, its node and its one terminal event, then nothing more."""

from __future__ import annotations

from typing import Any

from agent_core.bus.contracts.storage import (
    AppendEvent,
    CreateRun,
    GetRun,
    GetSession,
    ListAgents,
    ListEvents,
    RunFence,
    UpdateRun,
)
from agent_core.errors import ErrorPayload
from agent_core.ids import new_id
from agent_core.types.enums import AgentType, EndReason, EventType, RunStatus
from agent_core.types.runtime import TimelineEvent
from services.storage_writer.queries import QueryEngine
from services.storage_writer.schema import events_table, nodes_table
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.conftest import read_rows
from tests.unit.storage_writer.factories import (
    append_node,
    claim_run,
    create_run,
    create_session,
    end_run,
)

_TERMINAL = {"run_completed", "run_failed", "run_cancelled", "run_aborted"}


def _count(writer: Writer, session_id: str, table: str) -> int:
    return int(read_rows(writer, session_id, f"SELECT count(*) FROM {table}")[0][0])


def _events(engine: QueryEngine, session_id: str, run_id: str) -> list[dict[str, Any]]:
    rows = engine.answer(ListEvents(session_id=session_id, run_id=run_id)).data
    return list(rows)


def _run(engine: QueryEngine, session_id: str, run_id: str) -> dict[str, Any]:
    return dict(engine.answer(GetRun(run_id=run_id, session_id=session_id)).data)


def _agent_status(engine: QueryEngine, session_id: str, agent_id: str) -> str:
    agents = engine.answer(ListAgents(session_id=session_id)).data
    return str(next(a["status"] for a in agents if a["agent_id"] == agent_id))


def test_a_runs_end_is_one_write_with_its_node_and_terminal_event(
    writer: Writer, engine: QueryEngine
) -> None:
    s = create_session()
    run = create_run(s)
    writer.apply_batch([s, run, claim_run(s, run.run_id)])
    assert _agent_status(engine, s.session_id, s.root_agent_id) == "running"
    end = end_run(s, run.run_id, answer="the answer", turns=2)
    [receipt] = writer.apply_batch([end])
    assert receipt.ok, receipt.error
    assert receipt.result["status"] == "completed" and receipt.result["node"]["node_seq"] == 1
    stored = _run(engine, s.session_id, run.run_id)
    assert (stored["status"], stored["end_reason"], stored["turn_count"]) == (
        "completed",
        "completed",
        2,
    )
    assert stored["end_node_id"] == end.node.node_id  # type: ignore[union-attr]
    assert '"output_tokens":7' in stored["usage_json"]
    kinds = [(e["event_type"], e["node_id"]) for e in _events(engine, s.session_id, run.run_id)]
    answer_id = end.node.node_id  # type: ignore[union-attr]
    assert kinds == [
        ("run_queued", None),
        ("run_started", None),
        ("node_created", answer_id),
        ("run_completed", answer_id),
    ]
    assert _agent_status(engine, s.session_id, s.root_agent_id) == "idle"
    active = engine.answer(GetSession(session_id=s.session_id)).data["active_node_id"]
    assert active == answer_id
    # Redelivered: the first result, read back from its rows (no receipt); nothing twice.
    events_before = _count(writer, s.session_id, events_table(s.session_id))
    [again] = writer.apply_batch([end])
    assert again.ok and again.duplicate and again.result == receipt.result
    assert _count(writer, s.session_id, events_table(s.session_id)) == events_before
    receipts = _count(writer, s.session_id, "command_receipts")
    assert receipts == 2  # the session's and the run's creation: none for the end


def test_an_ended_run_refuses_every_later_write(writer: Writer, engine: QueryEngine) -> None:
    s = create_session()
    run = create_run(s)
    writer.apply_batch([s, run, claim_run(s, run.run_id)])
    fence = RunFence(run_id=run.run_id, attempt=1)
    assert writer.apply_batch([end_run(s, run.run_id, answer="done")])[0].ok
    nodes_before = _count(writer, s.session_id, nodes_table(s.session_id))
    event = TimelineEvent(
        event_id=new_id("evt"), event_type=EventType.TOOL_FAILED, run_id=run.run_id
    )
    late = [
        append_node(s, run_id=run.run_id, fence=fence),  # the attempt's own late node
        append_node(s, run_id=run.run_id),  # a node of the run without a fence
        AppendEvent(command_id=new_id("cmd"), session_id=s.session_id, event=event, fence=fence),
        AppendEvent(command_id=new_id("cmd"), session_id=s.session_id, event=event),
        # A cancel that raced the answer: a second end, of another kind.
        end_run(s, run.run_id, status=RunStatus.CANCELLED, reason=EndReason.ABORTED_STREAMING),
    ]
    receipts = writer.apply_batch(late)
    assert [r.error.code if r.error else "ok" for r in receipts] == ["run_ended"] * len(late)
    assert _count(writer, s.session_id, nodes_table(s.session_id)) == nodes_before
    terminal = [
        e["event_type"]
        for e in _events(engine, s.session_id, run.run_id)
        if e["event_type"] in _TERMINAL
    ]
    assert terminal == ["run_completed"]
    assert _run(engine, s.session_id, run.run_id)["status"] == "completed"


def test_only_the_current_attempt_ends_a_claimed_run(writer: Writer, engine: QueryEngine) -> None:
    s = create_session()
    run, queued = create_run(s), create_run(s)
    writer.apply_batch([s, run, queued, claim_run(s, run.run_id), claim_run(s, run.run_id, 2)])
    cancel = {"status": RunStatus.CANCELLED, "reason": EndReason.ABORTED_STREAMING}
    [unfenced, stale] = writer.apply_batch(
        [end_run(s, run.run_id, attempt=None, **cancel), end_run(s, run.run_id, **cancel)]
    )
    assert unfenced.error is not None and unfenced.error.code == "fence_required"
    assert stale.error is not None and stale.error.code == "stale_attempt"
    assert _run(engine, s.session_id, run.run_id)["status"] == "running"
    # A run that no attempt claimed ends without a fence: with its end reason and its event.
    [ended] = writer.apply_batch([end_run(s, queued.run_id, attempt=None, turns=0, **cancel)])
    assert ended.ok, ended.error
    stored = _run(engine, s.session_id, queued.run_id)
    assert (stored["status"], stored["end_reason"]) == ("cancelled", "aborted_streaming")
    assert [e["event_type"] for e in _events(engine, s.session_id, queued.run_id)] == [
        "run_queued",
        "run_cancelled",
    ]


def test_a_failed_run_tells_its_error_before_its_terminal_event(
    writer: Writer, engine: QueryEngine
) -> None:
    s = create_session()
    run = create_run(s)
    writer.apply_batch([s, run, claim_run(s, run.run_id)])
    error = ErrorPayload(type="provider_error", code="rate_limited", message="slow down")
    failed = end_run(
        s, run.run_id, status=RunStatus.FAILED, reason=EndReason.FAILED, error=error, turns=1
    )
    assert writer.apply_batch([failed])[0].ok
    events = _events(engine, s.session_id, run.run_id)
    assert [(e["event_type"], e["level"]) for e in events[-2:]] == [
        ("run_error", "error"),
        ("run_failed", "error"),
    ]
    assert '"rate_limited"' in events[-2]["payload_json"]
    assert '"rate_limited"' in _run(engine, s.session_id, run.run_id)["error_json"]


def test_a_withdrawn_message_leaves_the_active_path(writer: Writer, engine: QueryEngine) -> None:
    s = create_session()
    earlier = append_node(s)
    run = create_run(s)
    fence = RunFence(run_id=run.run_id, attempt=1)
    message = append_node(s, parent_id=earlier.node.node_id, run_id=run.run_id, fence=fence)
    run = run.model_copy(update={"start_node_id": message.node.node_id})
    writer.apply_batch([s, earlier, run, claim_run(s, run.run_id), message])
    assert engine.answer(GetSession(session_id=s.session_id)).data["active_node_id"] == (
        message.node.node_id
    )
    cancelled = end_run(
        s,
        run.run_id,
        status=RunStatus.CANCELLED,
        reason=EndReason.ABORTED_STREAMING,
        last_node_id=message.node.node_id,
        withdraw=True,
    )
    assert writer.apply_batch([cancelled])[0].ok
    session = engine.answer(GetSession(session_id=s.session_id)).data
    assert session["active_node_id"] == earlier.node.node_id
    # The message stays in the tree, as the run's start node.
    assert _count(writer, s.session_id, nodes_table(s.session_id)) == 2


def test_an_agent_runs_while_a_run_of_its_runs(writer: Writer, engine: QueryEngine) -> None:
    s = create_session()
    main, branch = create_run(s), create_run(s)
    writer.apply_batch([s, main, branch, claim_run(s, main.run_id), claim_run(s, branch.run_id)])
    root = s.root_agent_id
    assert _agent_status(engine, s.session_id, root) == "running"
    writer.apply_batch([end_run(s, main.run_id)])
    assert _agent_status(engine, s.session_id, root) == "running"  # the branch still runs
    writer.apply_batch([end_run(s, branch.run_id)])
    assert _agent_status(engine, s.session_id, root) == "idle"
    # A child agent ends in its run's end state.
    from agent_core.bus.contracts.storage import CreateAgent

    worker = new_id("agent")
    child = CreateRun(
        command_id=new_id("cmd"), session_id=s.session_id, run_id=new_id("run"), agent_id=worker
    )
    writer.apply_batch(
        [
            CreateAgent(
                command_id=new_id("cmd"),
                session_id=s.session_id,
                agent_id=worker,
                agent_type=AgentType.SUB,
                parent_agent_id=root,
            ),
            child,
            claim_run(s, child.run_id),
        ]
    )
    assert _agent_status(engine, s.session_id, worker) == "running"
    failed = end_run(
        s,
        child.run_id,
        status=RunStatus.FAILED,
        reason=EndReason.FAILED,
        error=ErrorPayload(type="run_error", code="x", message="y"),
    )
    writer.apply_batch([failed])
    assert _agent_status(engine, s.session_id, worker) == "failed"


def test_update_run_never_ends_a_run_and_a_waiting_run_goes_back_to_running(
    writer: Writer, engine: QueryEngine
) -> None:
    s = create_session()
    run = create_run(s)
    writer.apply_batch([s, run, claim_run(s, run.run_id)])
    fence = RunFence(run_id=run.run_id, attempt=1)

    def update(status: RunStatus, fenced: bool = True) -> UpdateRun:
        return UpdateRun(
            command_id=new_id("cmd"),
            session_id=s.session_id,
            run_id=run.run_id,
            status=status,
            fence=fence if fenced else None,
        )

    [ending] = writer.apply_batch([update(RunStatus.CANCELLED)])
    assert ending.error is not None and ending.error.code == "invalid_transition"
    assert writer.apply_batch([update(RunStatus.PENDING)])[0].ok
    assert _run(engine, s.session_id, run.run_id)["status"] == "pending"
    [unfenced] = writer.apply_batch([update(RunStatus.RUNNING, fenced=False)])
    assert unfenced.error is not None and unfenced.error.code == "invalid_transition"
    assert writer.apply_batch([update(RunStatus.RUNNING)])[0].ok
    assert _run(engine, s.session_id, run.run_id)["status"] == "running"
