"""Cancellation reaches a run within a second wherever it is, and ends it in exactly one state."""

from __future__ import annotations

import asyncio
import secrets
import signal
import time
from typing import Any

import psutil
import pytest

from agent_core.runqueue import cancel_run
from agent_core.types.enums import MultitaskStrategy
from tests.integration.run_worker.harness import (
    BusClient,
    Cluster,
    last_role,
    last_user_text,
    text_answer,
    tool_calls_turn,
)

# One cluster for the tests that neither kill a process nor need two workers (conftest.py).
SHARED_CLUSTER = True


async def _wait_event(
    client: BusClient, sid: str, run_id: str, kind: str, timeout_s: float = 20
) -> None:
    found = await client.wait_event(sid, run_id, lambda e: e["type"] == kind, timeout_s)
    assert found is not None, f"no {kind} event"


async def _cancel(client: BusClient, sid: str, run_id: str) -> tuple[str, str, Any]:
    """Cancel ``run_id``: how (signalled, cancelled), and its last event with the event's stream
    id (the bus's own clock: ``<ms>-<seq>``, comparable across the runs' streams)."""
    how = await cancel_run(client.storage, client.queue, session_id=sid, run_id=run_id)
    events = await client.events(sid, run_id, timeout_s=10)
    return how, events[-1][0], events[-1][1]


def _stream_order(event_id: str) -> tuple[int, int]:
    ms, seq = event_id.split("-")
    return int(ms), int(seq)


def _slow_text(request: Any) -> Any:
    return text_answer("one two three four five six seven eight nine ten", delay_s=0.4, pieces=10)


async def test_cancel_mid_stream_closes_the_provider_stream(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(_slow_text, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    run_id = (await client.send(sid, "talk slowly")).run_id
    await _wait_event(client, sid, run_id, "text_delta")
    how, _, finished = await _cancel(client, sid, run_id)
    assert how == "signalled"
    assert finished.type == "run_finished" and finished.status == "cancelled"
    assert finished.end_reason == "aborted_streaming"
    run = await client.run(run_id)
    assert (run["status"], run["end_reason"]) == ("cancelled", "aborted_streaming")
    tree = await client.tree(sid)
    assert [n["role"] for n in tree] == ["user", "assistant"]  # the partial answer is kept
    assert tree[1]["preview"].startswith("one")
    (answer,) = [n for n in await client.path(sid, tree[1]["node_id"]) if n["role"] != "user"]
    assert '"partial":true' in answer["metadata_json"], "marked as a partial answer"
    request = cluster.fake.requests[-1]
    assert request.done.wait(5) and request.client_closed and not request.completed


def _sleepy_tool(request: Any) -> Any:
    if last_role(request) == "tool":
        return text_answer("should not happen")
    code = "import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    return tool_calls_turn(
        ("call_" + secrets.token_hex(4), "run_python", {"code": code, "timeout_s": 120})
    )


async def test_cancel_during_a_tool_kills_it(make_cluster: Any, client: BusClient) -> None:
    cluster: Cluster = make_cluster(_sleepy_tool, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    run_id = (await client.send(sid, "run the long script")).run_id
    pid_file = client.home / "accounts/acct1/sessions" / sid / "scratchpad/pid"
    deadline = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    # The script's own pid is the sandbox's (its pid namespace): find it from the host side,
    # among the worker's descendants running a run_python script.
    worker = psutil.Process(next(iter(cluster.workers.values())).pid)
    scripts = [
        p for p in worker.children(recursive=True) if any(".run_python_" in a for a in p.cmdline())
    ]
    assert scripts, [p.cmdline() for p in worker.children(recursive=True)]
    how, _, finished = await _cancel(client, sid, run_id)
    assert how == "signalled"  # the script sleeps 60 s: ended before, it was cut off
    assert (finished.status, finished.end_reason) == ("cancelled", "aborted_tools")
    await asyncio.sleep(0.2)
    for script in scripts:
        assert not script.is_running() or script.status() == psutil.STATUS_ZOMBIE, script


async def test_queued_run_is_cancelled_without_executing(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(_slow_text, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    first = (await client.send(sid, "first")).run_id
    second = await client.send(sid, "second")
    await _wait_event(client, sid, first, "text_delta")
    how, ended, finished = await _cancel(client, sid, second.run_id)
    assert how == "cancelled"
    assert finished.status == "cancelled"
    await client.wait_terminal([first], timeout_s=20)
    first_ended = (await client.events(sid, first, timeout_s=10))[-1][0]
    assert _stream_order(ended) < _stream_order(first_ended), "it waited for the run ahead"
    tree = await client.tree(sid)
    assert second.node_id not in {n["node_id"] for n in tree}  # its message never became a node
    assert (await client.run(second.run_id))["attempt"] == 0  # never claimed
    assert all("second" not in last_user_text(r.json) for r in cluster.fake.requests)


_TERMINAL = {"run_completed", "run_failed", "run_cancelled", "run_aborted"}


def _quick(request: Any) -> Any:
    return text_answer("done quickly", pieces=2)


@pytest.mark.own_cluster  # two workers
async def test_cancel_racing_completion_ends_in_one_state(
    make_cluster: Any, client: BusClient
) -> None:
    make_cluster(_quick, workers=2)
    await client.wait_ready(("storage_writer", "run_worker"))
    seen: dict[str, int] = {}
    for i in range(12):
        sid = await client.new_session()
        run_id = (await client.send(sid, f"race {i}")).run_id
        await asyncio.sleep((i % 6) * 0.004)  # cancel at different points around completion
        await cancel_run(client.storage, client.queue, session_id=sid, run_id=run_id)
        events = await client.events(sid, run_id, timeout_s=10)
        finals = [e for _, e in events if e.type == "run_finished"]
        assert len(finals) == 1
        run = await client.run(run_id)
        assert run["status"] == finals[0].status in ("completed", "cancelled")
        # The timeline says the same, once: never run_completed and run_cancelled both.
        timeline = [e["event_type"] for e in await client.timeline(sid, run_id)]
        assert [t for t in timeline if t in _TERMINAL] == [f"run_{run['status']}"]
        await asyncio.sleep(0.3)
        assert (await client.run(run_id))["status"] == run["status"]  # never changes afterwards
        seen[run["status"]] = seen.get(run["status"], 0) + 1
    assert sum(seen.values()) == 12


@pytest.mark.own_cluster  # kills a worker
async def test_a_recovered_run_that_is_cancelled_ends_fenced_with_its_reason_and_event(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(_slow_text, workers=2)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    run_id = (await client.send(sid, "talk slowly")).run_id
    await _wait_event(client, sid, run_id, "text_delta")
    holder = await client.lease_holder_index(sid)
    assert holder is not None
    cluster.signal_worker(holder, signal.SIGKILL)  # its run stays in flight, claimed
    how = await cancel_run(client.storage, client.queue, session_id=sid, run_id=run_id)
    assert how == "signalled"  # nobody is there to hear it: the takeover finds the flag
    [run] = (await client.wait_terminal([run_id], timeout_s=30)).values()
    assert (run["status"], run["end_reason"], run["attempt"]) == (
        "cancelled",
        "aborted_streaming",
        2,
    )
    timeline = await client.timeline(sid, run_id)
    ends = [e for e in timeline if e["event_type"] in _TERMINAL]
    assert [e["event_type"] for e in ends] == ["run_cancelled"]
    assert [e["event_type"] for e in timeline].count("run_started") == 2
    events = await client.events(sid, run_id, timeout_s=10)
    assert [e.type for _, e in events].count("run_finished") == 1


async def test_a_cancel_whose_signal_was_lost_still_ends_the_run(
    make_cluster: Any, client: BusClient
) -> None:
    # Pub/sub drops what is published while a subscriber reconnects: only the flag is left.
    make_cluster(_slow_text, workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    run_id = (await client.send(sid, "talk slowly")).run_id
    await _wait_event(client, sid, run_id, "text_delta")
    await client.ctx.redis.set(client.ctx.names.run_cancel(run_id), b"1")  # no signal sent
    events = await client.events(sid, run_id, timeout_s=10)
    finished = events[-1][1]
    assert (finished.type, finished.status, finished.end_reason) == (
        "run_finished",
        "cancelled",
        "aborted_streaming",
    )
    assert (await client.run(run_id))["status"] == "cancelled"


async def test_a_newer_message_that_interrupts_ends_the_runs_it_displaces_aborted(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(
        lambda r: _slow_text(r) if "slow" in last_user_text(r) else text_answer("fresh"),
        workers=1,
    )
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    active = (await client.send(sid, "slow one")).run_id
    await _wait_event(client, sid, active, "text_delta")
    waiting = (await client.send(sid, "slow two")).run_id  # queued behind it
    newer = (await client.send(sid, "now this", strategy=MultitaskStrategy.INTERRUPT)).run_id
    runs = await client.wait_terminal([active, waiting, newer])
    # Nobody cancelled the displaced runs: the system stopped them for the newer message.
    assert (runs[active]["status"], runs[active]["end_reason"]) == ("aborted", "aborted_streaming")
    assert (runs[waiting]["status"], runs[waiting]["end_reason"]) == (
        "aborted",
        "aborted_streaming",
    )
    assert runs[newer]["status"] == "completed", cluster.log_text()[-2000:]
    for run_id in (active, waiting):
        ends = [e["event_type"] for e in await client.timeline(sid, run_id)]
        assert ends.count("run_aborted") == 1 and "run_cancelled" not in ends, ends
    # A cancel asked for by a client is still a cancel.
    plain = (await client.send(sid, "slow three")).run_id
    await _wait_event(client, sid, plain, "text_delta")
    _how, _, finished = await _cancel(client, sid, plain)
    assert finished.status == "cancelled"
