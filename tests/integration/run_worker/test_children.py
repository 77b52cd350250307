"""Child agents through real Valkey, the storage-writer, workers and the OpenAI fake.

A main run dispatches tasks to worker sub-agents (``dispatch_worker``): the workers run
concurrently as child runs, their nodes form each worker's own tree, their answers come back as
the parent's ``child_result`` tool node; a worker dispatched again continues its context (or starts
a new branch); cancelling the parent or the child, and killing the worker, end every run.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from agent_core.bus.contracts.storage import GetSession, ListAgents, ListRuns
from agent_core.runqueue import cancel_run
from agent_core.types.mappers import to_agent_state
from agent_core.types.storage import AgentRecord
from tests.integration.run_worker.harness import (
    BusClient,
    Cluster,
    last_role,
    last_user_text,
    text_answer,
    tool_calls_turn,
)

# One cluster per settings for the tests that neither kill a process nor write account-wide
# files (conftest.py).
SHARED_CLUSTER = True


def _first_user_text(request: Any) -> str:
    first = next(m for m in request["messages"] if m["role"] == "user")
    content = first["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def _dispatch(call_id: str, worker: str, task: str, **extra: Any) -> tuple[str, str, Any]:
    return (call_id, "dispatch_worker", {"worker": worker, "task": task, **extra})


def _model(request: Any) -> Any:
    if "FORK:" in last_user_text(request):  # a fork: knows the conversation
        return text_answer(f"fork read: {_first_user_text(request).split(chr(10))[0]}")
    if _first_user_text(request).startswith("TASK"):  # a worker: answers its latest task
        if "slowly" in last_user_text(request):
            return text_answer("w " * 30, delay_s=0.3, pieces=30)
        return text_answer(f"done: {last_user_text(request)}", pieces=2)
    if last_role(request) == "tool":
        return text_answer("The workers answered.")
    text = last_user_text(request)
    if "round 1" in text:
        return tool_calls_turn(
            _dispatch("call_a", "alpha", "TASK alpha: count the rows"),
            _dispatch("call_b", "beta", "TASK beta: sum the column"),
        )
    if "round 2" in text:
        return tool_calls_turn(
            _dispatch("call_a2", "alpha", "TASK alpha: and now the median"),
            _dispatch("call_b2", "beta", "TASK beta: start over", new_branch=True),
        )
    if "fork" in text:
        return tool_calls_turn(("call_f", "fork_agent", {"task": "FORK: what did they ask?"}))
    return tool_calls_turn(_dispatch("call_s", "slow", "TASK slow: talk slowly"))


async def _query(client: BusClient, query: Any) -> list[dict[str, Any]]:
    reply = await client.storage.query(query)
    assert reply.ok, reply
    return list(reply.data)


async def _children_of(client: BusClient, sid: str, run_id: str) -> list[dict[str, Any]]:
    runs = await _query(client, ListRuns(session_id=sid))
    return [
        r for r in runs if json.loads(r["metadata_json"] or "{}").get("parent_run_id") == run_id
    ]


async def test_workers_run_as_child_runs_and_keep_their_own_context(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(_model)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    first = await client.send(sid, "round 1: ask the workers")
    events = await client.events(sid, first.run_id)

    run = await client.run(first.run_id)
    assert run["status"] == "completed", cluster.log_text()
    children = await _children_of(client, sid, first.run_id)
    assert len(children) == 2 and all(c["status"] == "completed" for c in children)
    agents = {a["agent_id"]: a for a in await _query(client, ListAgents(session_id=sid))}
    root = agents[run["agent_id"]]
    workers = {json.loads(a["metadata_json"])["name"]: a for a in agents.values() if a is not root}
    assert set(workers) == {"alpha", "beta"}
    for name, agent in workers.items():
        assert agent["agent_type"] == "sub" and agent["parent_agent_id"] == root["agent_id"]
        assert agent["created_by_run_id"] == first.run_id and agent["status"] == "completed"
        state = to_agent_state(AgentRecord.model_validate(agent))  # what GET .../agents shows
        assert state.result is not None and state.result.status == "completed"
        assert state.result.text.startswith(f"done: TASK {name}")
    assert {c["agent_id"] for c in children} == {a["agent_id"] for a in workers.values()}

    # The parent's tree: message → dispatch calls → one child_result node → answer; the workers'
    # nodes are trees of their own and the session's active node stays on the parent's answer.
    path = await client.path(sid, run["end_node_id"])
    assert [(n["role"], n["node_type"]) for n in path] == [
        ("user", "message"),
        ("assistant", "message"),
        ("tool", "child_result"),
        ("assistant", "message"),
    ]
    assert "done: TASK alpha: count the rows" in path[2]["content_json"]
    assert "done: TASK beta: sum the column" in path[2]["content_json"]
    tree = await client.tree(sid)
    by_agent = {a: [n for n in tree if n["agent_id"] == a] for a in agents}
    for agent in workers.values():
        task, answer = by_agent[agent["agent_id"]]
        assert task["parent_id"] is None and answer["parent_id"] == task["node_id"]
    for c in children:  # a child run starts at its task, ends at its answer
        task, answer = by_agent[c["agent_id"]]
        assert (c["start_node_id"], c["end_node_id"]) == (task["node_id"], answer["node_id"])
    session = (await client.storage.query(GetSession(session_id=sid))).data
    assert session is not None and session["active_node_id"] == run["end_node_id"]

    # One ordered stream: the children's events, each child's end, then the parent's end.
    child_ids = {c["run_id"] for c in children}
    finished = [e.run_id for _, e in events if e.type == "run_finished"]
    assert finished == [first.run_id]  # run_finished is the parent's; a child's end a status
    ended = [
        (e.run_id, e.status)
        for _, e in events
        if e.type == "run_status_changed" and e.run_id in child_ids
    ]
    assert sorted(ended) == sorted(
        [(c, "running") for c in child_ids] + [(c, "completed") for c in child_ids]
    )
    assert events[-1][1].type == "run_finished" and events[-1][1].run_id == first.run_id
    child_nodes = [e for _, e in events if e.type == "node_created" and e.run_id in child_ids]
    assert len(child_nodes) == 4  # each child: its task, its answer
    for child_id in child_ids:  # each child's own stream: its events alone, ending with its end
        own = await client.events(sid, child_id, timeout_s=5)
        assert {e.run_id for _, e in own} == {child_id}
        assert [e.type for _, e in own if e.type not in ("text_delta", "phase")] == [
            "run_status_changed",
            "node_created",
            "usage",
            "node_created",
            "run_finished",
        ]
        assert own[-1][1].status == "completed"
    timeline = [e["event_type"] for e in await client.timeline(sid, first.run_id)]
    assert timeline.count("child_run_started") == 2 and timeline.count("child_run_finished") == 2

    # Again: alpha continues after its answer, beta starts a new branch of its tree.
    second = await client.send(sid, "round 2: ask again")
    await client.events(sid, second.run_id)
    assert (await client.run(second.run_id))["status"] == "completed", cluster.log_text()
    agents_after = await _query(client, ListAgents(session_id=sid))
    assert len(agents_after) == 3  # the same two workers
    tree = await client.tree(sid)
    alpha = [n for n in tree if n["agent_id"] == workers["alpha"]["agent_id"]]
    beta = [n for n in tree if n["agent_id"] == workers["beta"]["agent_id"]]
    assert alpha[2]["parent_id"] == alpha[1]["node_id"]  # after its first answer
    assert beta[2]["parent_id"] is None  # a new branch
    worker_requests = [
        r.json for r in cluster.fake.requests if _first_user_text(r.json).startswith("TASK")
    ]
    median = next(r for r in worker_requests if "median" in last_user_text(r))
    assert [m["role"] for m in median["messages"]] == ["user", "assistant", "user"]
    fresh = next(r for r in worker_requests if "start over" in last_user_text(r))
    assert [m["role"] for m in fresh["messages"]] == ["user"]
    assert all(
        "dispatch_worker" not in {t["function"]["name"] for t in r.get("tools", [])}
        for r in worker_requests
    )


async def test_a_fork_knows_the_conversation_and_branches_off_it(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(_model)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    sent = await client.send(sid, "please fork a helper")
    await client.events(sid, sent.run_id)
    run = await client.run(sent.run_id)
    assert run["status"] == "completed", cluster.log_text()
    [fork] = [
        a for a in await _query(client, ListAgents(session_id=sid)) if a["agent_type"] == "fork"
    ]
    assert fork["fork_from_node_id"] == sent.node_id and fork["parent_agent_id"] == run["agent_id"]
    [child] = await _children_of(client, sid, sent.run_id)
    assert child["agent_id"] == fork["agent_id"] and child["status"] == "completed"
    tree = await client.tree(sid)
    task = next(n for n in tree if n["agent_id"] == fork["agent_id"])
    assert task["parent_id"] == sent.node_id  # a branch off the parent's conversation
    path = await client.path(sid, run["end_node_id"])
    assert path[2]["node_type"] == "child_result"
    assert "fork read: please fork a helper" in path[2]["content_json"]
    [request] = [r.json for r in cluster.fake.requests if "FORK:" in last_user_text(r.json)]
    said = json.dumps(request["messages"])  # the conversation before the fork's turn, then its task
    assert said.index("please fork a helper") < said.index("FORK: what did they ask?")
    assert '"assistant"' not in said  # not the turn that called it
    names = {t["function"]["name"] for t in request.get("tools", [])}
    assert "lookup" in names or "read_file" in names
    assert not names & {"dispatch_worker", "fork_agent"}


async def _child_streaming(client: BusClient, sid: str, run_id: str) -> str:
    """The id of ``run_id``'s child once the child streams text."""
    event = await client.wait_event(
        sid, run_id, lambda e: e["type"] == "text_delta" and e["run_id"] != run_id, 20
    )
    assert event is not None, "the child never streamed"
    return str(event["run_id"])


async def _kill_the_holder(client: BusClient, cluster: Cluster, sid: str) -> None:
    holder = await client.lease_holder_index(sid)
    assert holder is not None
    cluster.signal_worker(holder, signal.SIGKILL)


async def test_cancelling_the_parent_ends_its_child(make_cluster: Any, client: BusClient) -> None:
    make_cluster(_model, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    parent = (await client.send(sid, "go")).run_id
    child = await _child_streaming(client, sid, parent)
    assert await cancel_run(client.storage, client.queue, session_id=sid, run_id=parent)
    events = await client.events(sid, parent, timeout_s=10)
    runs = await client.wait_terminal([parent, child], timeout_s=10)
    assert (runs[parent]["status"], runs[parent]["end_reason"]) == ("cancelled", "aborted_tools")
    assert (runs[child]["status"], runs[child]["end_reason"]) == (
        "cancelled",
        "aborted_streaming",  # cut off: its stream would have gone on for 9 s
    )
    ends = [
        (e.type, e.run_id) for _, e in events if e.type in ("run_finished", "run_status_changed")
    ]
    assert ends[-2:] == [("run_status_changed", child), ("run_finished", parent)]
    own = await client.events(sid, child, timeout_s=5)
    assert own[-1][1].type == "run_finished" and own[-1][1].status == "cancelled"


async def test_cancelling_the_child_alone_gives_the_parent_an_error_result(
    make_cluster: Any, client: BusClient
) -> None:
    make_cluster(_model, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    parent = (await client.send(sid, "go")).run_id
    child = await _child_streaming(client, sid, parent)
    await cancel_run(client.storage, client.queue, session_id=sid, run_id=child)
    await client.events(sid, parent, timeout_s=20)
    runs = await client.wait_terminal([parent, child], timeout_s=10)
    assert runs[child]["status"] == "cancelled"
    assert runs[parent]["status"] == "completed"  # the parent went on, told what happened
    path = await client.path(sid, runs[parent]["end_node_id"])
    result = path[2]
    assert result["node_type"] == "child_result" and '"is_error":true' in result["content_json"]
    assert "ended cancelled" in result["content_json"]


@pytest.mark.own_cluster  # kills a worker
async def test_a_child_in_flight_when_its_worker_dies_is_ended_by_the_takeover(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(_model, workers=2)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    parent = (await client.send(sid, "go")).run_id
    child = await _child_streaming(client, sid, parent)
    await _kill_the_holder(client, cluster, sid)
    runs = await client.wait_terminal([parent, child], timeout_s=30)
    # The dispatch's result is unknown to the parent: not re-run, both end worker_lost.
    for run_id in (parent, child):
        error = json.loads(runs[run_id]["error_json"])
        assert runs[run_id]["status"] == "failed" and error["code"] == "worker_lost", runs
    assert runs[child]["attempt"] == 2  # claimed by the takeover, so a stopped worker is fenced
    own = await client.events(sid, child, timeout_s=5)  # its own stream ended by the takeover
    assert own[-1][1].type == "run_finished" and own[-1][1].status == "failed"


@pytest.mark.own_cluster  # kills a worker
async def test_a_parent_cancelled_after_its_worker_died_ends_its_child_too(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(_model, workers=2)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    parent = (await client.send(sid, "go")).run_id
    child = await _child_streaming(client, sid, parent)
    await _kill_the_holder(client, cluster, sid)
    # Nobody hears this cancel; the worker that takes the run over finds its flag.
    await cancel_run(client.storage, client.queue, session_id=sid, run_id=parent)
    runs = await client.wait_terminal([parent, child], timeout_s=30)
    assert runs[parent]["status"] == "cancelled"
    assert runs[child]["status"] == "failed"
    assert json.loads(runs[child]["error_json"])["code"] == "worker_lost"


def _orchestrated(request: Any) -> Any:
    if _first_user_text(request).startswith("TASK"):
        return text_answer("rows: 42")
    if last_role(request) == "tool":
        return text_answer("The table has 42 rows.")
    return tool_calls_turn(_dispatch("call_o", "counter", "TASK counter: count the rows"))


async def test_an_orchestrator_delegates_and_its_workers_do_the_work(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(_orchestrated)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session(orchestrator=True)
    sent = await client.send(sid, "how many rows?")
    await client.events(sid, sent.run_id)
    run = await client.run(sent.run_id)
    assert run["status"] == "completed", cluster.log_text()
    agents = {a["agent_id"]: a for a in await _query(client, ListAgents(session_id=sid))}
    assert agents[run["agent_id"]]["agent_type"] == "orchestrator"
    [child] = await _children_of(client, sid, sent.run_id)
    assert agents[child["agent_id"]]["agent_type"] == "sub" and child["status"] == "completed"

    def tools(request: dict[str, Any]) -> set[str]:
        return {t["function"]["name"] for t in request.get("tools", [])}

    requests = [r.json for r in cluster.fake.requests]
    mine = [r for r in requests if not _first_user_text(r).startswith("TASK")]
    theirs = [r for r in requests if _first_user_text(r).startswith("TASK")]
    # The orchestrator plans and delegates: no workspace tools, the orchestration prompt.
    assert {"dispatch_worker", "fork_agent"} <= tools(mine[0])
    assert not tools(mine[0]) & {"run_python", "write_file", "read_file", "lookup"}
    assert mine[0]["messages"][0]["role"] == "system"
    assert "orchestrator" in mine[0]["messages"][0]["content"]
    # Its worker does the work with the session's tools and prompt (none here).
    assert {"run_python", "write_file"} <= tools(theirs[0])
    assert not tools(theirs[0]) & {"dispatch_worker", "fork_agent"}
    assert all(m["role"] != "system" for m in theirs[0]["messages"])


SKILL_BODY = "Count rows with wc -l, never by eye. ROWS-BODY-5d1"


def _skilled(request: Any) -> Any:
    if _first_user_text(request).startswith("TASK"):  # the worker: loads the skill, then answers
        if last_role(request) == "tool":
            return text_answer("rows: 42")
        return tool_calls_turn(("call_k", "load_skill", {"name": "rows"}))
    if last_role(request) == "tool":
        return text_answer("The table has 42 rows.")
    return tool_calls_turn(_dispatch("call_o", "counter", "TASK counter: count the rows"))


@pytest.mark.own_cluster  # writes the account's skills
async def test_an_orchestrators_worker_sees_and_loads_the_sessions_skills(
    make_cluster: Any, client: BusClient
) -> None:
    """Skills reach every kind of agent: the worker an orchestrator dispatches gets the skill
    listing and ``load_skill``, and the body of the skill it loads is in its next request."""
    folder = client.home / "accounts" / "acct1" / "skills" / "rows"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: rows\ndescription: Count rows.\n---\n{SKILL_BODY}\n"
    )
    cluster: Cluster = make_cluster(_skilled, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session(orchestrator=True)
    sent = await client.send(sid, "how many rows?")
    run = (await client.wait_terminal([sent.run_id]))[sent.run_id]
    assert run["status"] == "completed", cluster.log_text()[-3000:]
    [child] = await _children_of(client, sid, sent.run_id)
    assert child["status"] == "completed"

    def system(request: dict[str, Any]) -> str:
        return "\n".join(str(m["content"]) for m in request["messages"] if m["role"] == "system")

    theirs = [r.json for r in cluster.fake.requests if _first_user_text(r.json).startswith("TASK")]
    first, second = theirs
    assert "rows: Count rows." in system(first) and SKILL_BODY not in system(first)
    assert "load_skill" in {t["function"]["name"] for t in first["tools"]}
    assert SKILL_BODY in system(second)
    result = next(m for m in second["messages"] if m.get("tool_call_id") == "call_k")
    assert "not available" not in str(result["content"]) and "unknown" not in str(result["content"])
