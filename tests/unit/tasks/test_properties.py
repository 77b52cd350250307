"""Properties: replay equals memory, refusals change nothing, truncation never loses a record."""

from __future__ import annotations

import contextlib
import random
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_core.tasks.codec import encode_record
from agent_core.tasks.dag import apply, ready_ids
from agent_core.tasks.errors import TaskRuleError
from agent_core.tasks.rules import evolve
from agent_core.tasks.wal import ReplayStatus, replay
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
    TaskCommand,
    UpdateTask,
)
from agent_core.types.tasks import Task, TaskDAG, TaskStatus, TaskWalEvent
from tests.properties import examples
from tests.unit.tasks.support import ALICE, BOB, LIST, SESSION, T0, assert_invariants

TASKS = [f"task_{c}" for c in "abcdef"]
task_ids = st.sampled_from(TASKS)
agents = st.sampled_from([ALICE, BOB])
texts = st.text(min_size=1, max_size=12)
notes = st.none() | texts
# Mostly the right list; now and then a command addressed to another one.
list_names = st.sampled_from([LIST] * 19 + ["another list"])


def _cmd(cls: type, **fields: st.SearchStrategy[object]) -> st.SearchStrategy[TaskCommand]:
    return st.builds(
        cls, session_id=st.just(SESSION), list_name=list_names, agent_id=agents, **fields
    )


transition = {"task_id": task_ids, "note": notes}
# Blind commands: mostly refused once a list exists, which is what checks "refusals change nothing".
commands: st.SearchStrategy[TaskCommand] = st.one_of(
    _cmd(CreateList),
    _cmd(
        AddTask,
        task_id=task_ids,
        title=texts,
        dependencies=st.lists(task_ids, max_size=3).map(tuple),
    ),
    _cmd(UpdateTask, task_id=task_ids, title=st.none() | texts, note=texts),
    *(_cmd(c, **transition) for c in (ClaimTask, ReleaseTask, CompleteTask, FailTask, CancelTask)),
    *(_cmd(c, task_id=task_ids, depends_on=task_ids) for c in (AddDependency, RemoveDependency)),
)
ADDRESS = {"session_id": st.just(SESSION), "list_name": st.just(LIST)}


def _by_claimant(
    cls: type, active: list[Task], *, other: bool = False
) -> st.SearchStrategy[TaskCommand]:
    """``cls`` on an in-progress task, by its claimant (or, with ``other``, by someone else)."""

    def build(task: Task) -> st.SearchStrategy[TaskCommand]:
        fields = {"note": texts} if cls is UpdateTask else {"note": notes}
        agent = (BOB if task.claimant == ALICE else ALICE) if other else task.claimant
        return st.builds(
            cls, task_id=st.just(task.id), agent_id=st.just(agent), **ADDRESS, **fields
        )

    return st.sampled_from(active).flatmap(build)


def _guided(dag: TaskDAG | None) -> st.SearchStrategy[TaskCommand]:
    """Commands that the rules will probably accept in ``dag``, so histories get deep."""
    if dag is None:
        return st.builds(CreateList, agent_id=agents, **ADDRESS)
    ids = list(dag.tasks)
    unused = [t for t in TASKS if t not in dag.tasks]
    active = [t for t in dag.tasks.values() if t.status is TaskStatus.IN_PROGRESS]
    pending = [t for t in ids if dag.tasks[t].status is TaskStatus.PENDING]
    options: list[st.SearchStrategy[TaskCommand]] = []
    if unused:
        deps = st.lists(st.sampled_from(ids), unique=True, max_size=3) if ids else st.just([])
        options.append(
            st.builds(
                AddTask,
                task_id=st.sampled_from(unused),
                title=texts,
                dependencies=deps.map(tuple),
                agent_id=agents,
                **ADDRESS,
            )
        )
    if ready_ids(dag):
        options.append(
            st.builds(
                ClaimTask,
                task_id=st.sampled_from(ready_ids(dag)),
                agent_id=agents,
                note=notes,
                **ADDRESS,
            )
        )
    if active:
        for cls in (
            ReleaseTask,
            CompleteTask,
            CompleteTask,
            CompleteTask,
            FailTask,
            CancelTask,
            UpdateTask,
        ):
            options.append(_by_claimant(cls, active))
        cls_ = st.sampled_from([ClaimTask, ReleaseTask, CompleteTask, CancelTask, UpdateTask])
        options.append(cls_.flatmap(lambda c: _by_claimant(c, active, other=True)))
    if pending:
        options.append(
            st.builds(CancelTask, task_id=st.sampled_from(pending), agent_id=agents, **ADDRESS)
        )
        for cls in (AddDependency, RemoveDependency):
            options.append(
                st.builds(
                    cls,
                    task_id=st.sampled_from(pending),
                    depends_on=st.sampled_from(ids),
                    agent_id=agents,
                    **ADDRESS,
                )
            )
    return st.one_of(options) if options else commands


@st.composite
def scripts(draw: st.DrawFn, max_steps: int = 50) -> list[TaskCommand]:
    """A command history: three guided commands for every blind one."""
    dag: TaskDAG | None = None
    script: list[TaskCommand] = []
    for _ in range(draw(st.integers(0, max_steps))):
        command = draw(_guided(dag) if draw(st.integers(0, 3)) else commands)
        script.append(command)
        with contextlib.suppress(TaskRuleError):  # refused commands stay in the script
            dag = apply(dag, command, now=T0).dag
    return script


def run(script: list[TaskCommand], create_first: bool) -> tuple[TaskDAG | None, list[TaskWalEvent]]:
    """Apply ``script`` like the service would; check that every refusal changes nothing."""
    if create_first:
        script = [CreateList(session_id=SESSION, list_name=LIST, agent_id=ALICE), *script]
    dag: TaskDAG | None = None
    events: list[TaskWalEvent] = []
    now = T0
    for step, command in enumerate(script):
        now += timedelta(milliseconds=step % 3)  # equal timestamps happen too
        snapshot = None if dag is None else dag.model_dump()
        try:
            result = apply(dag, command, now=now)
        except TaskRuleError:
            assert (None if dag is None else dag.model_dump()) == snapshot
            continue
        if not result.changed:
            assert result.dag is dag
        assert [e.seq for e in result.events] == list(
            range(len(events) + 1, len(events) + 1 + len(result.events))
        )
        dag, events = result.dag, events + list(result.events)
        assert_invariants(dag)
    return dag, events


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts(), st.booleans())
def test_replaying_the_wal_yields_exactly_the_memory_dag(
    script: list[TaskCommand], create_first: bool
) -> None:
    dag, events = run(script, create_first)
    data = b"".join(encode_record(e) for e in events)
    result = replay(data)
    assert result.status is ReplayStatus.CLEAN
    assert (result.records, result.valid_length) == (len(events), len(data))
    assert result.dag == dag
    assert (None if dag is None else dag.model_dump()) == (
        None if result.dag is None else result.dag.model_dump()
    )


def _states(events: list[TaskWalEvent]) -> list[TaskDAG | None]:
    states: list[TaskDAG | None] = [None]
    for event in events:
        states.append(evolve(states[-1], event))
    return states


def _check_cut(data: bytes, ends: list[int], states: list[TaskDAG | None], cut: int) -> None:
    result = replay(data[:cut])
    complete = data[:cut].count(b"\n")  # records whose newline made it before the cut
    assert result.status is not ReplayStatus.CORRUPT
    assert result.records == complete
    assert result.dag == states[complete]
    assert result.valid_length == ends[complete]
    assert result.torn_bytes == cut - ends[complete]
    assert (result.status is ReplayStatus.CLEAN) == (cut == ends[complete])


def test_truncation_at_1000_offsets_keeps_every_complete_record() -> None:
    rng = random.Random(20260101)
    script = _long_script(rng)
    _, events = run(script, create_first=True)
    lines = [encode_record(e) for e in events]
    data = b"".join(lines)
    ends = [0]
    for line in lines:
        ends.append(ends[-1] + len(line))
    assert len(events) >= 40 and len(data) > 2_000
    around_ends = {max(0, min(len(data), e + d)) for e in ends for d in (-2, -1, 0, 1, 2)}
    offsets = sorted(around_ends | set(rng.sample(range(len(data) + 1), 1_000)))
    assert len(offsets) >= 1_000
    states = _states(events)
    for cut in offsets:
        _check_cut(data, ends, states, cut)


def _long_script(rng: random.Random) -> list[TaskCommand]:
    """A deterministic busy history: tasks added, chained, claimed, finished, released."""
    address = {"session_id": SESSION, "list_name": LIST}
    script: list[TaskCommand] = []
    for i, task_id in enumerate(TASKS):
        deps = tuple(rng.sample(TASKS[:i], k=min(i, 2)))
        script.append(
            AddTask(
                task_id=task_id, title=f"step {i} ✓", dependencies=deps, agent_id=ALICE, **address
            )
        )
    for task_id in TASKS * 4:
        agent = rng.choice([ALICE, BOB])
        script.append(ClaimTask(task_id=task_id, agent_id=agent, **address))
        script.append(
            UpdateTask(task_id=task_id, note=f"working on {task_id}", agent_id=agent, **address)
        )
        finish = rng.choice([ReleaseTask, CompleteTask, ReleaseTask])
        script.append(finish(task_id=task_id, agent_id=agent, note="n", **address))
    return script


@settings(max_examples=examples(100), deadline=None)
@given(scripts(max_steps=30), st.data())
def test_random_truncation_of_random_wals(script: list[TaskCommand], data: st.DataObject) -> None:
    _, events = run(script, create_first=True)
    lines = [encode_record(e) for e in events]
    wal = b"".join(lines)
    ends = [0]
    for line in lines:
        ends.append(ends[-1] + len(line))
    cut = data.draw(st.integers(0, len(wal)), label="cut")
    _check_cut(wal, ends, _states(events), cut)


@settings(max_examples=examples(200), deadline=None)
@given(scripts(max_steps=20), st.data())
def test_a_damaged_byte_is_never_silently_accepted(
    script: list[TaskCommand], data: st.DataObject
) -> None:
    dag, events = run(script, create_first=True)
    lines = [encode_record(e) for e in events]
    wal = bytearray(b"".join(lines))
    where = data.draw(st.integers(0, len(wal) - 1), label="where")
    wal[where] = data.draw(st.integers(0, 255).filter(lambda b: b != wal[where]), label="byte")
    result = replay(bytes(wal))  # never raises
    in_last_line = where >= len(wal) - len(lines[-1])
    if result.status is ReplayStatus.CLEAN:
        # Only an equivalent spelling (e.g. the case of a \\u escape's hex digit) may pass.
        assert result.dag == dag and result.records == len(events)
    elif result.status is ReplayStatus.TORN_TAIL:
        assert in_last_line and result.records == len(events) - 1
    else:
        assert result.dag is None and result.corruption is not None
