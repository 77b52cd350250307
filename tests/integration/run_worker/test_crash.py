"""Crash safety: SIGKILL the worker running a run (20 kill points), SIGSTOP one past its lease.

Invariants checked: every run ends terminal, none stuck ``running``; no tool call is executed twice
(each execution appends its call id to a log in the session's scratchpad); a stopped worker that
wakes up after a takeover has its writes refused by fencing.
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import signal
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.integration.run_worker.harness import (
    BusClient,
    Cluster,
    last_role,
    text_answer,
    tool_calls_turn,
)

MAX_ATTEMPTS = 3  # run_worker.max_attempts, the default
KILLS = 14


def _tool_model(sleep_s: float) -> Any:
    def answer(request: Any) -> Any:
        if last_role(request) == "tool":
            return text_answer("finished", pieces=2)
        call_id = "call_" + secrets.token_hex(6)
        code = (
            "import time\n"
            f"open('calls.log', 'a').write('{call_id}\\n')\n"
            f"time.sleep({sleep_s})\n"
            "print('ok')\n"
        )
        return tool_calls_turn((call_id, "run_python", {"code": code}))

    return answer


_PHASES = ("run_status_changed", "tool_started", "tool_result", "text_delta")


async def _wait_for_event(client: BusClient, sid: str, run_id: str, kind: str) -> None:
    await client.wait_event(sid, run_id, lambda e: e["type"] in (kind, "run_finished"), 15)


async def _holder(client: BusClient, sid: str) -> int | None:
    return await client.lease_holder_index(sid)


def _executed_calls(home: Path) -> Counter[str]:
    calls: Counter[str] = Counter()
    for log in home.glob("accounts/*/sessions/*/scratchpad/calls.log"):
        calls.update(line for line in log.read_text().splitlines() if line)
    return calls


async def test_sigkill_of_the_running_worker(make_cluster: Any, client: BusClient) -> None:
    rng = random.Random(1729)
    cluster: Cluster = make_cluster(_tool_model(0.15), workers=2)
    await client.wait_ready(("storage_writer", "run_worker"))
    runs: list[tuple[str, str]] = []
    kills: list[tuple[str, str, float]] = []  # (session, run, time of the kill)
    attempts = 0
    while len(kills) < KILLS and attempts < 4 * KILLS:
        attempts += 1
        sid = await client.new_session()
        run_id = (await client.send(sid, f"job {attempts}")).run_id
        runs.append((sid, run_id))
        # Kill points spread over the run: after a chosen event has appeared, plus jitter.
        phase = rng.choice(_PHASES)
        await _wait_for_event(client, sid, run_id, phase)
        await asyncio.sleep(rng.uniform(0.0, 0.08))
        holder = await _holder(client, sid)
        if holder is None:
            continue  # finished before the kill point, or not started yet
        cluster.signal_worker(holder, signal.SIGKILL)
        kills.append((sid, run_id, time.time()))
        cluster.start_worker(holder)
    assert len(kills) == KILLS

    finished = await client.wait_terminal([r for _, r in runs], timeout_s=90)
    statuses = Counter(r["status"] for r in finished.values())
    assert set(statuses) <= {"completed", "failed"}, (statuses, cluster.log_text()[-4000:])
    for run in finished.values():
        if run["status"] == "failed":
            code = json.loads(run["error_json"])["code"]
            # A run that lost its worker more often than the cap (a kill, or a starved worker's
            # lease taken over on a loaded machine) ends with the cap's code, never runs on.
            assert code == "worker_lost" or (
                code == "attempts_exhausted" and run["attempt"] > MAX_ATTEMPTS
            ), run
    # No tool call ran twice; every completed run ran its call exactly once.
    executed = _executed_calls(client.home)
    assert all(n == 1 for n in executed.values()), executed
    for sid, run_id in runs:
        if finished[run_id]["status"] != "completed":
            continue
        tree = await client.tree(sid)
        tools = [n for n in tree if n["role"] == "tool"]
        assert len(tools) == 1 and len(tree) == 4, tree
    # Every kill is followed on its run's stream by events of the takeover (a dead worker writes
    # nothing after its kill), unless the run had ended before it. Recovery time: from the kill
    # to the run's next event.
    recoveries = []
    for sid, run_id, killed_at in kills:
        events = await client.events(sid, run_id, timeout_s=10)
        stamps = [e.created_at.timestamp() for _, e in events]
        after = [stamp for stamp in stamps if stamp > killed_at]
        ended_before = events[-1][1].type == "run_finished" and stamps[-1] <= killed_at
        assert after or ended_before, (run_id, [e.type for _, e in events])
        if after:
            recoveries.append(min(after) - killed_at)
    assert recoveries, "no killed run produced an event after its kill"
    p99 = sorted(recoveries)[max(0, int(len(recoveries) * 0.99) - 1)]
    print(
        f"\nSIGKILL recovery over {len(recoveries)} kills: p50 {statistics.median(recoveries):.2f}s "
        f"p99 {p99:.2f}s max {max(recoveries):.2f}s; outcomes {dict(statuses)}; "
        f"attempts {dict(Counter(r['attempt'] for r in finished.values()))}"
    )
    # How soon is a figure, not a bound: it is lease TTL + sweep + the restarted worker's start-up,
    # seconds of CPU on a loaded machine. ``make bench`` measures it (bench/faults.py,
    # ``lost_worker_noticed_s``); a run never taken over fails wait_terminal above.


async def test_stopped_worker_is_fenced_after_a_takeover(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(_tool_model(2.5), workers=2)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    run_id = (await client.send(sid, "long job")).run_id

    deadline = time.monotonic() + 20
    while not _executed_calls(client.home):  # the tool is running now
        assert time.monotonic() < deadline, cluster.log_text()[-3000:]
        await asyncio.sleep(0.05)
    stale = await _holder(client, sid)
    assert stale is not None
    cluster.signal_worker(stale, signal.SIGSTOP)
    try:
        done = await client.wait_terminal([run_id], timeout_s=30)
        run = done[run_id]
        # The other worker took over (attempt 2); the tool's result is unknown to it, so it
        # ended the run rather than run the tool again.
        assert run["attempt"] == 2 and run["status"] == "failed"
        assert json.loads(run["error_json"])["code"] == "worker_lost"
    finally:
        cluster.signal_worker(stale, signal.SIGCONT)

    # The stale worker wakes up, its tool finishes, it tries to store the result: refused.
    deadline = time.monotonic() + 20
    while "was superseded" not in cluster.log_text():
        assert time.monotonic() < deadline, cluster.log_text()[-3000:]
        await asyncio.sleep(0.1)
    tree = await client.tree(sid)
    assert [n["role"] for n in tree] == ["user", "assistant", "tool"], tree
    # The tool node is attempt 2's end (the call's result is unknown), not attempt 1's result.
    ended = (await client.path(sid, tree[2]["node_id"]))[-1]
    assert ended["run_id"] == run_id and '"interrupted":true' in ended["metadata_json"], ended
    assert '"is_error":true' in ended["content_json"] and "ok" not in ended["content_json"]
    assert (await client.run(run_id))["status"] == "failed"  # a terminal state never changes
    assert sum(_executed_calls(client.home).values()) == 1
