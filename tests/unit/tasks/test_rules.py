"""``evolve`` checks records as strictly as commands: what replay relies on."""

from __future__ import annotations

import pytest

from agent_core.tasks.codec import seal
from agent_core.tasks.errors import TaskErrorCode as E
from agent_core.tasks.errors import TaskRuleError
from agent_core.tasks.rules import depends_transitively, evolve
from agent_core.types.tasks import ListCreated, TaskAdded, TaskClaimed, TaskDAG, TaskUpdated
from tests.unit.tasks.support import ALICE, LIST, SESSION, T0

CREATED = ListCreated(name=LIST, session_id=SESSION, agent_id=ALICE)


def created() -> TaskDAG:
    return evolve(None, seal(1, T0, CREATED))


def test_first_record_creates_the_list() -> None:
    dag = created()
    assert (dag.name, dag.session_id, dag.seq, dag.created_at) == (LIST, SESSION, 1, T0)


@pytest.mark.parametrize("seq", [1, 3, 7])
def test_records_out_of_sequence_are_refused(seq: int) -> None:
    dag = created()
    change = TaskAdded(task_id="task_a", title="t", agent_id=ALICE)
    with pytest.raises(TaskRuleError) as info:
        evolve(dag, seal(seq, T0, change))
    assert info.value.task_code is E.SEQ_MISMATCH


def test_first_record_must_create_the_list() -> None:
    with pytest.raises(TaskRuleError) as info:
        evolve(None, seal(1, T0, TaskAdded(task_id="task_a", title="t", agent_id=ALICE)))
    assert info.value.task_code is E.LIST_NOT_FOUND


def test_list_is_created_only_once() -> None:
    with pytest.raises(TaskRuleError) as info:
        evolve(created(), seal(2, T0, CREATED))
    assert info.value.task_code is E.LIST_EXISTS


def test_empty_update_record_is_refused() -> None:
    dag = evolve(created(), seal(2, T0, TaskAdded(task_id="task_a", title="t", agent_id=ALICE)))
    with pytest.raises(TaskRuleError) as info:
        evolve(dag, seal(3, T0, TaskUpdated(task_id="task_a", agent_id=ALICE)))
    assert info.value.task_code is E.EMPTY_UPDATE


def test_claim_record_for_missing_task_is_refused() -> None:
    with pytest.raises(TaskRuleError) as info:
        evolve(created(), seal(2, T0, TaskClaimed(task_id="task_a", agent_id=ALICE)))
    assert info.value.task_code is E.TASK_NOT_FOUND


def test_depends_transitively_follows_chains_only_forward() -> None:
    dag = created()
    chain = [("task_a", ()), ("task_b", ("task_a",)), ("task_c", ("task_b",))]
    for seq, (task_id, deps) in enumerate(chain, start=2):
        dag = evolve(
            dag,
            seal(seq, T0, TaskAdded(task_id=task_id, title="t", dependencies=deps, agent_id=ALICE)),
        )
    assert depends_transitively(dag, "task_c", "task_a")
    assert not depends_transitively(dag, "task_a", "task_c")
    assert not depends_transitively(dag, "task_a", "task_a")


def test_a_record_copies_the_tasks_unless_the_caller_owns_them() -> None:
    dag = evolve(created(), seal(2, T0, TaskAdded(task_id="task_a", title="a", agent_id=ALICE)))
    copied = evolve(dag, seal(3, T0, TaskAdded(task_id="task_b", title="b", agent_id=ALICE)))
    assert list(dag.tasks) == ["task_a"] and list(copied.tasks) == ["task_a", "task_b"]
    claim = seal(3, T0, TaskClaimed(task_id="task_a", agent_id=ALICE))
    owned = evolve(dag, claim, in_place=True)
    assert owned.tasks is dag.tasks and owned.seq == 3 and dag.seq == 2
    assert owned.tasks["task_a"].claimant == ALICE
    refused = seal(4, T0, TaskClaimed(task_id="task_x", agent_id=ALICE))
    with pytest.raises(TaskRuleError):
        evolve(owned, refused, in_place=True)
    assert list(owned.tasks) == ["task_a"] and owned.seq == 3  # a refusal changes nothing
