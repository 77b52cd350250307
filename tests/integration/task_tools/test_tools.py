"""The task tools through the ToolExecutor against a running task-wal: the DAG and the WAL they
leave, their metadata, rule violations and corruption as error results, retries applied once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent_core.tasks import ReplayStatus, TaskStatus, decode_record, list_file_name, replay
from agent_core.tasks.client import TaskClient
from agent_core.tasks.templates import PLAN_TEMPLATE, TASK_TEMPLATE
from agent_core.tasks.tools import task_tools
from agent_core.tools import (
    MemoryArtifactSink,
    PermissionGate,
    PermissionRules,
    ToolExecutor,
    ToolRegistry,
    Workspace,
)
from agent_core.types.protocol import TextBlock, ToolCall, ToolResult
from tests.integration.task_tools.conftest import MakeExecutor
from tests.integration.task_wal.conftest import RunningService, scope_of

_calls = iter(range(1_000_000))


def wal_path(project: Path, session_id: str, name: str) -> Path:
    return project / ".soong-agent" / "tasks" / session_id / list_file_name(name)


async def call(ex: ToolExecutor, name: str, call_id: str | None = None, **args: Any) -> ToolResult:
    call_id = call_id or f"call_{next(_calls)}"
    return await ex.execute(ToolCall(id=call_id, name=name, arguments=args))


def text(result: ToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return block.text


def ok(result: ToolResult) -> ToolResult:
    assert not result.is_error, text(result)
    return result


def wal_kinds(project: Path, session_id: str, name: str) -> list[str]:
    data = wal_path(project, session_id, name).read_bytes()
    assert replay(data).status is ReplayStatus.CLEAN
    return [str(decode_record(line).kind) for line in data.splitlines()]


async def test_tools_build_the_dag_and_the_wal_with_board_and_event_metadata(
    task_wal: RunningService,
    client: TaskClient,
    make_executor: MakeExecutor,
    project: Path,
    session_id: str,
) -> None:
    alice = make_executor()
    async with task_wal():
        made = ok(await call(alice, "task_create_list", list_name="ship", plan_path="plans/s.md"))
        assert made.metadata["task_event"] == {
            "list": "ship",
            "change": "list_created",
            "task_id": None,
        }
        a = ok(await call(alice, "task_add", list_name="ship", title="Write the parser"))
        a_id = a.metadata["task_event"]["task_id"]
        b = ok(
            await call(
                alice,
                "task_add",
                list_name="ship",
                title="Test the parser",
                description="empty input, huge input",
                dependencies=[a_id],
            )
        )
        b_id = b.metadata["task_event"]["task_id"]
        assert f"{b_id} Test the parser — blocked by {a_id}" in b.metadata["task_board"]
        assert f"{a_id} Write the parser — ready" in b.metadata["task_board"]
        ok(await call(alice, "task_claim", list_name="ship", task_id=a_id))
        ok(await call(alice, "task_update", list_name="ship", task_id=a_id, note="half way"))
        done = ok(
            await call(alice, "task_complete", list_name="ship", task_id=a_id, note="in parse.py")
        )
        assert done.metadata["task_event"] == {
            "list": "ship",
            "change": "task_completed",
            "task_id": a_id,
        }
        assert f"[x] {a_id}" in done.metadata["task_board"]
        assert f"{b_id} Test the parser — ready" in done.metadata["task_board"]
        assert done.metadata["task_board"] in text(done)  # the model sees the same board
        ok(await call(alice, "task_claim", list_name="ship", task_id=b_id))
        failed = ok(
            await call(alice, "task_fail", list_name="ship", task_id=b_id, note="no fixtures")
        )
        assert failed.metadata["task_event"]["change"] == "task_failed"
        view = await client.get_dag(session_id, scope_of(project), "ship")
    dag = view.dag
    assert dag.plan is not None and dag.plan.path == "plans/s.md"
    assert [(t.id, t.status, t.claimant) for t in dag.tasks.values()] == [
        (a_id, TaskStatus.COMPLETED, "agent_alice"),
        (b_id, TaskStatus.FAILED, "agent_alice"),
    ]
    assert [n.text for n in dag.tasks[a_id].notes] == ["half way", "in parse.py"]
    assert dag.tasks[b_id].dependencies == (a_id,)
    assert replay(wal_path(project, session_id, "ship").read_bytes()).dag == dag
    assert wal_kinds(project, session_id, "ship") == [
        "list_created",
        "task_added",
        "task_added",
        "task_claimed",
        "task_updated",
        "task_completed",
        "task_claimed",
        "task_failed",
    ]


async def test_rule_violations_are_error_results_that_say_what_to_do_and_change_nothing(
    task_wal: RunningService, make_executor: MakeExecutor, project: Path, session_id: str
) -> None:
    alice, bob = make_executor(), make_executor(agent_id="agent_bob")
    async with task_wal():
        ok(await call(alice, "task_create_list", list_name="l"))
        a_id = ok(await call(alice, "task_add", list_name="l", title="a")).metadata["task_event"][
            "task_id"
        ]
        b = await call(alice, "task_add", list_name="l", title="b", dependencies=[a_id])
        b_id = ok(b).metadata["task_event"]["task_id"]
        before = wal_kinds(project, session_id, "l")
        blocked = await call(bob, "task_claim", list_name="l", task_id=b_id)
        assert blocked.is_error and blocked.metadata["error_code"] == "task_blocked"
        assert a_id in text(blocked) and "claim a ready task" in text(blocked)
        assert "task_board" not in blocked.metadata and "task_event" not in blocked.metadata
        ok(await call(alice, "task_claim", list_name="l", task_id=a_id))
        stolen = await call(bob, "task_complete", list_name="l", task_id=a_id)
        assert stolen.is_error and stolen.metadata["error_code"] == "task_not_claimant"
        again = await call(alice, "task_create_list", list_name="l")
        assert again.is_error and "already exists" in text(again)
        missing = await call(alice, "task_add", list_name="nope", title="x")
        assert missing.is_error and "task_create_list" in text(missing)
    assert wal_kinds(project, session_id, "l") == [*before, "task_claimed"]  # alice's claim only
    assert not wal_path(project, session_id, "nope").exists()


async def test_bad_arguments_are_reported_by_the_executor_before_any_command(
    task_wal: RunningService, make_executor: MakeExecutor, project: Path, session_id: str
) -> None:
    alice = make_executor()
    async with task_wal():
        ok(await call(alice, "task_create_list", list_name="l"))
        no_title = await call(alice, "task_add", list_name="l")
        bad_id = await call(alice, "task_claim", list_name="l", task_id="1")
        empty = await call(alice, "task_update", list_name="l", task_id="task_abc")
        fail_without_reason = await call(alice, "task_fail", list_name="l", task_id="task_abc")
    for result, needle in [
        (no_title, "title: Field required"),
        (bad_id, "task_id"),
        (empty, "at least one of title, description or note"),
        (fail_without_reason, "note: Field required"),
    ]:
        assert result.is_error and result.metadata["error_code"] == "invalid_arguments"
        assert needle in text(result)
    assert wal_kinds(project, session_id, "l") == ["list_created"]


async def test_a_repeated_tool_call_id_is_applied_once_even_across_a_restart(
    task_wal: RunningService,
    client: TaskClient,
    make_executor: MakeExecutor,
    project: Path,
    session_id: str,
) -> None:
    async with task_wal():
        ok(await call(make_executor(), "task_create_list", list_name="l", call_id="tc_1"))
        first = ok(await call(make_executor(), "task_add", "tc_2", list_name="l", title="t"))
        claim = ok(
            await call(
                make_executor(),
                "task_claim",
                "tc_3",
                list_name="l",
                task_id=first.metadata["task_event"]["task_id"],
            )
        )
        assert "already applied" not in text(claim)
    async with task_wal():  # a resumed run repeats its last tool calls with the same ids
        retried = ok(await call(make_executor(), "task_add", "tc_2", list_name="l", title="t"))
        reclaim = ok(
            await call(
                make_executor(),
                "task_claim",
                "tc_3",
                list_name="l",
                task_id=first.metadata["task_event"]["task_id"],
            )
        )
        view = await client.get_dag(session_id, scope_of(project), "l")
    assert retried.metadata["task_event"] == first.metadata["task_event"]
    assert "already applied" in text(retried) and "already applied" in text(reclaim)
    assert retried.metadata["task_board"] == reclaim.metadata["task_board"]
    assert list(view.dag.tasks) == [first.metadata["task_event"]["task_id"]]
    assert wal_kinds(project, session_id, "l") == ["list_created", "task_added", "task_claimed"]


async def test_a_corrupt_list_is_an_error_result_and_its_neighbour_still_works(
    task_wal: RunningService, make_executor: MakeExecutor, project: Path, session_id: str
) -> None:
    alice = make_executor()
    async with task_wal():
        for name in ("good", "bad"):
            ok(await call(alice, "task_create_list", list_name=name))
            ok(await call(alice, "task_add", list_name=name, title="first"))
            ok(await call(alice, "task_add", list_name=name, title="second"))
    bad = wal_path(project, session_id, "bad")
    lines = bad.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"first", b"First")  # bit rot in the middle of the file
    bad.write_bytes(b"".join(lines))
    async with task_wal():
        added = await call(alice, "task_add", list_name="bad", title="third")
        board = await call(alice, "task_list", list_name="bad")
        listed = ok(await call(alice, "task_list"))
        fine = ok(await call(alice, "task_add", list_name="good", title="third"))
    for result in (added, board):
        assert result.is_error and result.metadata["error_code"] == "task_wal_corrupt"
        assert "line 2" in text(result) and "tell the user" in text(result)
    assert f"unavailable ({bad.name})" in text(listed) and "`good`: 2 tasks" in text(listed)
    assert "3 tasks" in fine.metadata["task_board"]
    assert bad.read_bytes() == b"".join(lines)


async def test_task_list_shows_boards_and_lists(
    task_wal: RunningService, make_executor: MakeExecutor
) -> None:
    alice = make_executor()
    async with task_wal():
        empty = ok(await call(alice, "task_list"))
        ok(await call(alice, "task_create_list", list_name="l"))
        ok(await call(alice, "task_add", list_name="l", title="t", description="the details"))
        board = ok(await call(alice, "task_list", list_name="l"))
        unknown = await call(alice, "task_list", list_name="nope")
    assert "No task lists" in text(empty)
    assert "the details" in text(board) and "1 ready" in text(board)
    assert "task_board" not in board.metadata  # a query changes nothing
    assert unknown.is_error and unknown.metadata["error_code"] == "task_list_not_found"


async def test_no_answer_from_the_service_is_an_error_result(
    impatient_client: TaskClient, make_executor: MakeExecutor
) -> None:
    result = await call(make_executor(via=impatient_client), "task_create_list", list_name="l")
    assert result.is_error and result.metadata["error_code"] == "bus_timeout"
    assert "task_list to check" in text(result)


async def test_templates_name_node_types_and_only_real_tools(
    make_executor: MakeExecutor, client: TaskClient, project: Path
) -> None:
    alice = make_executor()
    task = ok(await call(alice, "task_template"))
    plan = ok(await call(alice, "plan_template"))
    assert (task.metadata["node_type"], text(task)) == ("task_instruction", TASK_TEMPLATE)
    assert (plan.metadata["node_type"], text(plan)) == ("plan_instruction", PLAN_TEMPLATE)
    names = {t.name for t in task_tools(client, scope=scope_of(project))}
    mentioned = set(re.findall(r"`(task_[a-z_]+)`", TASK_TEMPLATE + PLAN_TEMPLATE))
    assert mentioned and mentioned <= names


async def test_a_run_whose_ids_the_domain_refuses_gets_an_error_result(
    client: TaskClient, project: Path, tmp_path: Path
) -> None:
    executor = ToolExecutor(
        ToolRegistry(task_tools(client, scope=scope_of(project))),
        workspace=Workspace(tmp_path / "home", "acct_1", "sess_1"),  # not a real session id
        run_id="run_1",
        agent_id="agent_alice",
        permissions=PermissionGate(PermissionRules()),
        artifacts=MemoryArtifactSink(),
    )
    result = await call(executor, "task_create_list", list_name="l")
    assert result.is_error and result.metadata["error_code"] == "invalid_context"
    assert "invalid session_id" in text(result)
