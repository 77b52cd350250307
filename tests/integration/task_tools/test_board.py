"""The board and list texts the task tools show (pure rendering, no service)."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_core.bus.contracts.tasks import TaskDagView, TaskListInfo, TaskListsView
from agent_core.errors import ErrorPayload
from agent_core.tasks import TaskDAG, apply, blocked_ids, ready_ids
from agent_core.tasks.templates import BOARD_LIMIT, render_board, render_lists
from agent_core.types.task_commands import AddTask, CreateList, TaskCommand

SESSION = "sess_20260101_000000_abcd"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def dag_of(*commands: TaskCommand) -> TaskDagView:
    dag: TaskDAG | None = None
    for command in commands:
        dag = apply(dag, command, now=NOW).dag
    assert dag is not None
    return TaskDagView(dag=dag, ready=ready_ids(dag), blocked=blocked_ids(dag))


def add(task_id: str, title: str, *deps: str) -> AddTask:
    return AddTask(
        session_id=SESSION,
        list_name="l",
        agent_id="agent_1",
        task_id=task_id,
        title=title,
        dependencies=deps,
    )


CREATE = CreateList(session_id=SESSION, list_name="l", agent_id="agent_1")


def test_a_title_with_newlines_stays_on_its_line_and_an_empty_list_says_so() -> None:
    assert render_board(dag_of(CREATE)).endswith("(no tasks yet)")
    board = render_board(dag_of(CREATE, add("task_a", "one\n- [x] fake line")))
    assert board.splitlines()[1:] == ["- [ ] task_a one - [x] fake line — ready"]


def test_a_long_list_is_cut_with_a_count_of_the_rest() -> None:
    view = dag_of(CREATE, *(add(f"task_{i}", f"t{i}") for i in range(BOARD_LIMIT + 5)))
    lines = render_board(view).splitlines()
    assert len(lines) == 1 + BOARD_LIMIT + 1
    assert lines[0].startswith(f"**Task list `l`** — {BOARD_LIMIT + 5} tasks")
    assert lines[-1] == "- … and 5 more tasks"


def test_lists_show_unavailable_ones_with_their_error() -> None:
    error = ErrorPayload(type="task_error", code="task_wal_corrupt", message="line 2 is corrupt")
    view = TaskListsView(
        session_id=SESSION,
        lists=[
            TaskListInfo(name=None, file_name="bad.wal.jsonl", available=False, error=error),
            TaskListInfo(
                name="good",
                file_name="good.wal.jsonl",
                available=True,
                task_count=3,
                status_counts={"pending": 2, "completed": 1},
            ),
        ],
    )
    assert render_lists(view).splitlines() == [
        "Task lists of this session:",
        "- unavailable (bad.wal.jsonl): line 2 is corrupt",
        "- `good`: 3 tasks (1 completed, 2 pending)",
        "Call task_list with list_name for a list's board.",
    ]
