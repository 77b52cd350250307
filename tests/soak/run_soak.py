"""Soak: 1,000 runs on a real storage-writer and three run-workers (processes) while cancels,
worker SIGKILLs and provider errors are injected at random (seeded). Outside the default suite:
``make soak`` (``SOAK_RUNS``, ``SOAK_SEED``, ``SOAK_SESSIONS`` change the load).

Checked at the end, over every run: it ended (a terminal status); its timeline has exactly one
terminal event; its event stream has at most one ``run_finished``, and one if the stream still
exists; no lane stays leased, no run stays in a processing list or the pending set. Printed last:
one JSON line with the figures; the exit code is 1 if any check failed.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import secrets
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

from agent_core.bus import BusNames  # noqa: E402
from agent_core.runqueue import cancel_run  # noqa: E402
from agent_core.service.valkey import EmbeddedValkey  # noqa: E402
from tests.fakes.script import (  # noqa: E402
    Delay,
    Drop,
    ErrorEvent,
    ScriptedStatus,
    ScriptedTurn,
    Text,
)
from tests.integration.run_worker.harness import (  # noqa: E402
    CONFIG,
    BusClient,
    Cluster,
    fake_server,
    last_role,
    text_answer,
    tool_calls_turn,
)

RUNS = int(os.environ.get("SOAK_RUNS", "1000"))
SESSIONS = int(os.environ.get("SOAK_SESSIONS", "40"))
SEED = int(os.environ.get("SOAK_SEED", "20261201"))
WORKERS = 3
P_CANCEL = 0.10  # a run is cancelled at a random moment
P_PROVIDER_ERROR = 0.08  # a model call fails: a 500 before the stream, an error or a cut in it
KILL_EVERY_S = (4.0, 9.0)  # a random worker is SIGKILLed (and restarted) this often
TERMINAL = {"run_completed", "run_failed", "run_cancelled", "run_aborted"}


class Model:
    """The fake provider's answers: one tool call, then a short streamed answer; sometimes a
    failure instead (counted)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.errors: Counter[str] = Counter()

    def __call__(self, request: Any) -> Any:
        if self.rng.random() < P_PROVIDER_ERROR:
            kind = self.rng.choice(("status_500", "error_event", "drop"))
            self.errors[kind] += 1
            if kind == "status_500":
                return ScriptedStatus(status=500)
            tail = ErrorEvent() if kind == "error_event" else Drop()
            return ScriptedTurn(steps=[Text(text="partial "), Delay(seconds=0.02), tail])
        if last_role(request) == "tool":
            return text_answer("done, " * 20, delay_s=0.01, pieces=4)
        call = "call_" + secrets.token_hex(5)
        return tool_calls_turn((call, "list_dir", {"path": "scratchpad"}))


async def _session(
    client: BusClient, sid: str, runs: int, rng: random.Random, out: dict[str, Any]
) -> None:
    """``runs`` messages one after the other in one session; some cancelled mid-way."""
    for i in range(runs):
        started = time.monotonic()
        sent = await client.send(sid, f"message {i}")
        out["runs"][sent.run_id] = sid
        if rng.random() < P_CANCEL:
            await asyncio.sleep(rng.uniform(0.0, 0.3))
            await cancel_run(client.storage, client.queue, session_id=sid, run_id=sent.run_id)
            out["cancels"] += 1
        await client.wait_terminal([sent.run_id], timeout_s=300)
        out["latencies"].append(time.monotonic() - started)


async def _killer(
    cluster: Cluster, rng: random.Random, stop: asyncio.Event, out: dict[str, Any]
) -> None:
    while not stop.is_set():
        try:
            async with asyncio.timeout(rng.uniform(*KILL_EVERY_S)):
                await stop.wait()
        except TimeoutError:
            victim = rng.randrange(WORKERS)
            cluster.signal_worker(victim, signal.SIGKILL)
            cluster.start_worker(victim)
            out["kills"] += 1


async def _check(client: BusClient, out: dict[str, Any]) -> dict[str, Any]:
    """The invariants over every run (see the module docstring)."""
    runs: dict[str, dict[str, Any]] = await client.wait_terminal(list(out["runs"]), timeout_s=300)
    double_terminal, double_finished, unfinished_streams = [], [], []
    for run_id, sid in out["runs"].items():
        timeline = await client.timeline(sid, run_id)
        if sum(1 for e in timeline if e["event_type"] in TERMINAL) != 1:
            double_terminal.append(run_id)
        stream = client.ctx.names.run_events(sid, run_id)
        entries = await client.ctx.redis.xrange(stream)
        finished = sum(1 for _, f in entries if b'"type":"run_finished"' in f[b"data"])
        if finished > 1:
            double_finished.append(run_id)
        if entries and finished == 0:
            unfinished_streams.append(run_id)
    sessions = set(out["runs"].values())
    leased, in_flight = [], []
    for sid in sessions:
        for _ in range(100):  # a lane is released once its worker finds nothing more to do
            if await client.queue.lease_holder(sid) is None:
                break
            await asyncio.sleep(0.1)
        if await client.queue.lease_holder(sid) is not None:
            leased.append(sid)
        if await client.queue.in_flight(sid) is not None:
            in_flight.append(sid)
    pending = await client.queue.pending_lanes()
    return {
        "runs": len(runs),
        "statuses": dict(Counter(r["status"] for r in runs.values())),
        "end_reasons": dict(Counter(r["end_reason"] for r in runs.values())),
        "error_codes": dict(
            Counter(json.loads(r["error_json"])["code"] for r in runs.values() if r["error_json"])
        ),
        "max_attempt": max(r["attempt"] for r in runs.values()),
        "runs_with_two_terminal_events": len(double_terminal),
        "streams_with_two_run_finished": len(double_finished),
        "streams_without_run_finished": len(unfinished_streams),
        "lanes_still_leased": len(leased),
        "lanes_with_a_run_in_flight": len(in_flight),
        "lanes_still_pending": len(pending),
    }


async def soak(home: Path, redis_url: str) -> dict[str, Any]:
    names = BusNames(f"soak{secrets.token_hex(3)}")
    model = Model(random.Random(SEED + 1))
    (home / "config.toml").write_text(CONFIG.format(memory="false"))
    cluster = Cluster(redis_url, names, home, fake_server(model))
    client = BusClient(redis_url, names, home)
    await client.start()
    out: dict[str, Any] = {"runs": {}, "cancels": 0, "kills": 0, "latencies": []}
    cluster.start_writer()
    for i in range(WORKERS):
        cluster.start_worker(i)
    try:
        await client.wait_ready(("storage_writer", "run_worker"), timeout_s=180)
        sids = [await client.new_session() for _ in range(SESSIONS)]
        per = [RUNS // SESSIONS + (1 if i < RUNS % SESSIONS else 0) for i in range(SESSIONS)]
        stop = asyncio.Event()
        started = time.monotonic()
        killer = asyncio.create_task(_killer(cluster, random.Random(SEED + 2), stop, out))
        rngs = [random.Random(SEED + 10 + i) for i in range(SESSIONS)]
        await asyncio.gather(
            *(_session(client, s, n, r, out) for s, n, r in zip(sids, per, rngs, strict=True))
        )
        stop.set()
        await killer
        wall = time.monotonic() - started
        figures = await _check(client, out)
    finally:
        await client.close()
        cluster.stop()
        cluster.fake.stop_thread()
    latencies = sorted(out["latencies"])
    return {
        "bench": "soak",
        "seed": SEED,
        "workers": WORKERS,
        "sessions": SESSIONS,
        **figures,
        "cancels_requested": out["cancels"],
        "worker_kills": out["kills"],
        "provider_errors_injected": dict(model.errors),
        "wall_s": round(wall, 1),
        "run_p50_s": round(statistics.median(latencies), 3),
        "run_p99_s": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 3),
        "ok": figures["runs"] == RUNS
        and figures["runs_with_two_terminal_events"] == 0
        and figures["streams_with_two_run_finished"] == 0
        and figures["streams_without_run_finished"] == 0
        and figures["lanes_still_leased"] == 0
        and figures["lanes_with_a_run_in_flight"] == 0
        and figures["lanes_still_pending"] == 0,
    }


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="soong-soak-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        valkey = EmbeddedValkey(Path(tmp) / "valkey", appendonly=False)
        valkey.start()
        try:
            result = asyncio.run(soak(home, valkey.url))
        finally:
            valkey.stop()
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
