"""Every DAG rule and every refusal, through :func:`agent_core.tasks.dag.apply`."""

from __future__ import annotations

import pytest

from agent_core.tasks.dag import apply, blocked_ids, ready_ids
from agent_core.tasks.errors import TaskErrorCode as E
from agent_core.types.task_commands import (
    AddDependency,
    AddTask,
    CancelTask,
    ClaimTask,
    CompleteTask,
    CreateList,
    FailTask,
    ReleaseTask,
    RemoveDependency,
    UpdateTask,
)
from agent_core.types.tasks import TaskChangeKind, TaskStatus
from tests.unit.tasks.support import ALICE, BOB, LIST, SESSION, T0, Board, assert_invariants


@pytest.fixture
def board() -> Board:
    b = Board()
    b.do(CreateList)
    return b


def add(board: Board, task_id: str, *deps: str, title: str = "t") -> None:
    board.do(AddTask, task_id=task_id, title=title, dependencies=deps)


def claimed(board: Board, task_id: str, agent: str = ALICE) -> None:
    add(board, task_id)
    board.do(ClaimTask, task_id=task_id, agent_id=agent)


# ---------------------------------------------------------------------------- list


def test_create_list_writes_first_record() -> None:
    board = Board()
    result = board.do(CreateList)
    assert [e.seq for e in result.events] == [1]
    assert result.events[0].kind is TaskChangeKind.LIST_CREATED
    assert (board.state.name, board.state.session_id, board.state.seq) == (LIST, SESSION, 1)
    assert board.state.created_at == board.clock and board.state.tasks == {}


def test_create_existing_list_is_refused(board: Board) -> None:
    board.refuse(E.LIST_EXISTS, CreateList)


def test_command_before_list_exists_is_refused() -> None:
    Board().refuse(E.LIST_NOT_FOUND, AddTask, title="x")


@pytest.mark.parametrize(
    "address",
    [{"list_name": "other"}, {"session_id": "sess_20260101_120000_ffff"}],
)
def test_command_for_another_list_is_refused(board: Board, address: dict[str, str]) -> None:
    board.refuse(E.LIST_MISMATCH, AddTask, title="x", **address)


def test_seq_increases_by_one_per_change(board: Board) -> None:
    add(board, "task_a")
    add(board, "task_b")
    assert [e.seq for e in board.events] == [1, 2, 3]
    assert board.state.seq == 3


def test_apply_never_edits_the_input_dag(board: Board) -> None:
    add(board, "task_a")
    before = board.state
    snapshot = before.model_dump()
    board.do(ClaimTask, task_id="task_a")
    assert before.model_dump() == snapshot
    assert before.tasks["task_a"].status is TaskStatus.PENDING


# ---------------------------------------------------------------------------- add


def test_add_task_is_pending_and_unclaimed(board: Board) -> None:
    board.do(AddTask, task_id="task_a", title="Write", description="the spec")
    task = board.state.tasks["task_a"]
    assert (task.title, task.description, task.status, task.claimant) == (
        "Write",
        "the spec",
        TaskStatus.PENDING,
        None,
    )
    assert task.created_at == task.updated_at == board.clock
    assert task.finished_at is None


def test_add_task_keeps_insertion_order(board: Board) -> None:
    for name in ("task_c", "task_a", "task_b"):
        add(board, name)
    assert list(board.state.tasks) == ["task_c", "task_a", "task_b"]


def test_add_with_existing_id_and_other_content_is_refused(board: Board) -> None:
    add(board, "task_a", title="one")
    board.refuse(E.TASK_EXISTS, AddTask, task_id="task_a", title="two")


def test_identical_add_retry_writes_nothing(board: Board) -> None:
    add(board, "task_a", title="one")
    before = board.state
    result = board.do(AddTask, task_id="task_a", title="one")
    assert not result.changed and result.dag is before


def test_add_with_missing_dependency_is_refused(board: Board) -> None:
    board.refuse(
        E.DEPENDENCY_NOT_FOUND, AddTask, task_id="task_a", title="t", dependencies=("task_x",)
    )


def test_add_depending_on_itself_is_refused(board: Board) -> None:
    board.refuse(E.SELF_DEPENDENCY, AddTask, task_id="task_a", title="t", dependencies=("task_a",))


def test_add_with_duplicate_dependency_is_refused(board: Board) -> None:
    add(board, "task_a")
    deps = ("task_a", "task_a")
    board.refuse(E.DUPLICATE_DEPENDENCY, AddTask, task_id="task_b", title="t", dependencies=deps)


# ---------------------------------------------------------------------------- update


def test_update_replaces_fields_and_appends_note(board: Board) -> None:
    add(board, "task_a", title="old")
    board.do(UpdateTask, task_id="task_a", title="new", note="started reading", agent_id=BOB)
    task = board.state.tasks["task_a"]
    assert (task.title, task.description) == ("new", "")
    assert [(n.agent_id, n.text, n.at) for n in task.notes] == [
        (BOB, "started reading", board.clock)
    ]
    assert task.updated_at == board.clock


def test_update_missing_task_is_refused(board: Board) -> None:
    board.refuse(E.TASK_NOT_FOUND, UpdateTask, task_id="task_x", note="n")


def test_claimed_task_is_updated_only_by_its_claimant(board: Board) -> None:
    claimed(board, "task_a", ALICE)
    board.refuse(E.NOT_CLAIMANT, UpdateTask, task_id="task_a", note="mine now", agent_id=BOB)
    board.do(UpdateTask, task_id="task_a", note="halfway", agent_id=ALICE)
    assert board.state.tasks["task_a"].notes[-1].text == "halfway"


def test_finished_task_cannot_be_updated(board: Board) -> None:
    claimed(board, "task_a")
    board.do(CompleteTask, task_id="task_a")
    board.refuse(E.INVALID_TRANSITION, UpdateTask, task_id="task_a", title="again")


# ---------------------------------------------------------------------------- claim, release


def test_claim_moves_ready_task_to_in_progress(board: Board) -> None:
    add(board, "task_a")
    board.do(ClaimTask, task_id="task_a", agent_id=BOB, note="on it")
    task = board.state.tasks["task_a"]
    assert (task.status, task.claimant) == (TaskStatus.IN_PROGRESS, BOB)
    assert task.notes[-1].text == "on it"


def test_claim_of_blocked_task_is_refused_and_names_the_blockers(board: Board) -> None:
    add(board, "task_a")
    add(board, "task_b")
    add(board, "task_c", "task_a", "task_b")
    error = board.refuse(E.BLOCKED, ClaimTask, task_id="task_c")
    assert error.details["unmet"] == ["task_a", "task_b"]
    assert "task_a, task_b" in error.message


def test_claim_of_task_claimed_by_another_is_refused(board: Board) -> None:
    claimed(board, "task_a", ALICE)
    board.refuse(E.ALREADY_CLAIMED, ClaimTask, task_id="task_a", agent_id=BOB)


def test_claim_retry_by_claimant_writes_nothing(board: Board) -> None:
    claimed(board, "task_a", ALICE)
    assert not board.do(ClaimTask, task_id="task_a", agent_id=ALICE).changed


def test_claim_of_missing_task_is_refused(board: Board) -> None:
    board.refuse(E.TASK_NOT_FOUND, ClaimTask, task_id="task_x")


def test_release_returns_task_to_pending(board: Board) -> None:
    claimed(board, "task_a", ALICE)
    board.do(ReleaseTask, task_id="task_a", agent_id=ALICE, note="stuck")
    task = board.state.tasks["task_a"]
    assert (task.status, task.claimant) == (TaskStatus.PENDING, None)
    board.do(ClaimTask, task_id="task_a", agent_id=BOB)  # and anyone may claim it again
    assert board.state.tasks["task_a"].claimant == BOB


def test_release_by_another_agent_is_refused(board: Board) -> None:
    claimed(board, "task_a", ALICE)
    error = board.refuse(E.NOT_CLAIMANT, ReleaseTask, task_id="task_a", agent_id=BOB)
    assert error.details["claimant"] == ALICE


def test_release_of_unclaimed_task_is_refused(board: Board) -> None:
    add(board, "task_a")
    board.refuse(E.INVALID_TRANSITION, ReleaseTask, task_id="task_a")


# ---------------------------------------------------------------------------- finish


@pytest.mark.parametrize(
    ("command", "status"), [(CompleteTask, TaskStatus.COMPLETED), (FailTask, TaskStatus.FAILED)]
)
def test_claimant_finishes_task(board: Board, command: type, status: TaskStatus) -> None:
    claimed(board, "task_a", BOB)
    board.do(command, task_id="task_a", agent_id=BOB, note="result")
    task = board.state.tasks["task_a"]
    assert (task.status, task.claimant, task.finished_at) == (status, BOB, board.clock)
    assert task.notes[-1].text == "result"
    assert not board.do(command, task_id="task_a", agent_id=BOB).changed  # retry


@pytest.mark.parametrize("command", [CompleteTask, FailTask])
def test_only_claimant_finishes_task(board: Board, command: type) -> None:
    claimed(board, "task_a", ALICE)
    board.refuse(E.NOT_CLAIMANT, command, task_id="task_a", agent_id=BOB)


@pytest.mark.parametrize("command", [CompleteTask, FailTask])
def test_unclaimed_task_cannot_be_finished(board: Board, command: type) -> None:
    add(board, "task_a")
    board.refuse(E.INVALID_TRANSITION, command, task_id="task_a")


def test_finished_task_never_changes_state_again(board: Board) -> None:
    claimed(board, "task_a")
    board.do(FailTask, task_id="task_a", note="broken")
    board.refuse(E.INVALID_TRANSITION, CompleteTask, task_id="task_a")
    board.refuse(E.INVALID_TRANSITION, ClaimTask, task_id="task_a")
    board.refuse(E.INVALID_TRANSITION, ReleaseTask, task_id="task_a")
    board.refuse(E.INVALID_TRANSITION, CancelTask, task_id="task_a")


def test_anyone_cancels_pending_task(board: Board) -> None:
    add(board, "task_a")
    board.do(CancelTask, task_id="task_a", agent_id=BOB, note="not needed")
    task = board.state.tasks["task_a"]
    assert (task.status, task.claimant, task.finished_at) == (
        TaskStatus.CANCELLED,
        None,
        board.clock,
    )
    assert not board.do(CancelTask, task_id="task_a", agent_id=ALICE).changed  # already so


def test_claimed_task_is_cancelled_only_by_claimant(board: Board) -> None:
    claimed(board, "task_a", ALICE)
    board.refuse(E.NOT_CLAIMANT, CancelTask, task_id="task_a", agent_id=BOB)
    board.do(CancelTask, task_id="task_a", agent_id=ALICE)
    assert board.state.tasks["task_a"].status is TaskStatus.CANCELLED


# ---------------------------------------------------------------------------- dependencies


def test_add_and_remove_dependency(board: Board) -> None:
    add(board, "task_a")
    add(board, "task_b")
    board.do(AddDependency, task_id="task_b", depends_on="task_a")
    assert board.state.tasks["task_b"].dependencies == ("task_a",)
    assert not board.do(AddDependency, task_id="task_b", depends_on="task_a").changed
    board.do(RemoveDependency, task_id="task_b", depends_on="task_a")
    assert board.state.tasks["task_b"].dependencies == ()
    assert not board.do(RemoveDependency, task_id="task_b", depends_on="task_a").changed


def test_direct_cycle_is_refused(board: Board) -> None:
    add(board, "task_a")
    add(board, "task_b", "task_a")
    board.refuse(E.CYCLE, AddDependency, task_id="task_a", depends_on="task_b")


def test_long_cycle_is_refused_but_a_diamond_is_fine(board: Board) -> None:
    add(board, "task_a")
    add(board, "task_b", "task_a")
    add(board, "task_c", "task_b")
    add(board, "task_d", "task_a")
    board.refuse(E.CYCLE, AddDependency, task_id="task_a", depends_on="task_c")
    board.do(AddDependency, task_id="task_d", depends_on="task_c")  # diamond, no cycle
    assert_invariants(board.state)


def test_dependency_on_missing_task_is_refused(board: Board) -> None:
    add(board, "task_a")
    board.refuse(E.DEPENDENCY_NOT_FOUND, AddDependency, task_id="task_a", depends_on="task_x")
    board.refuse(E.DEPENDENCY_NOT_FOUND, RemoveDependency, task_id="task_a", depends_on="task_x")
    board.refuse(E.TASK_NOT_FOUND, AddDependency, task_id="task_x", depends_on="task_a")


def test_self_dependency_is_refused(board: Board) -> None:
    add(board, "task_a")
    board.refuse(E.SELF_DEPENDENCY, AddDependency, task_id="task_a", depends_on="task_a")


def test_dependencies_change_only_while_pending(board: Board) -> None:
    add(board, "task_a")
    add(board, "task_b", "task_a")
    add(board, "task_c")
    board.do(CancelTask, task_id="task_b")
    board.refuse(E.INVALID_TRANSITION, RemoveDependency, task_id="task_b", depends_on="task_a")
    board.do(ClaimTask, task_id="task_c")
    board.refuse(E.NOT_PENDING, AddDependency, task_id="task_c", depends_on="task_a")


# ---------------------------------------------------------------------------- derived sets


def test_ready_and_blocked_follow_dependencies(board: Board) -> None:
    add(board, "task_a")
    add(board, "task_b")
    add(board, "task_c", "task_a", "task_b")
    assert ready_ids(board.state) == ("task_a", "task_b")
    assert blocked_ids(board.state) == ("task_c",)
    board.do(ClaimTask, task_id="task_a")
    assert ready_ids(board.state) == ("task_b",)  # in progress is neither ready nor blocked
    board.do(CompleteTask, task_id="task_a")
    board.do(ClaimTask, task_id="task_b")
    board.do(CompleteTask, task_id="task_b")
    assert (ready_ids(board.state), blocked_ids(board.state)) == (("task_c",), ())


@pytest.mark.parametrize("finish", [FailTask, CancelTask])
def test_a_failed_or_cancelled_dependency_keeps_a_task_blocked(board: Board, finish: type) -> None:
    claimed(board, "task_a")
    add(board, "task_b", "task_a")
    board.do(finish, task_id="task_a")
    assert blocked_ids(board.state) == ("task_b",)
    board.do(RemoveDependency, task_id="task_b", depends_on="task_a")  # the way out
    assert ready_ids(board.state) == ("task_b",)


def test_refusal_becomes_a_redacted_payload(board: Board) -> None:
    error = board.refuse(E.TASK_NOT_FOUND, ClaimTask, task_id="task_x")
    payload = error.to_payload()
    assert (payload.type, payload.code, payload.details) == (
        "task_error",
        "task_not_found",
        {"task_id": "task_x"},
    )


def test_naive_time_is_refused() -> None:
    command = CreateList(session_id=SESSION, list_name=LIST, agent_id=ALICE)
    with pytest.raises(ValueError, match="timezone"):
        apply(None, command, now=T0.replace(tzinfo=None))
