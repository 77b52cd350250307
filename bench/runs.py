"""Run throughput and turn latency of the whole stack, with the peers' workload.

One turn = one user message → the scripted model asks for one ``lookup`` tool call (~300 B) → it
answers ~1 KB. The model is the in-process scripted adapter (provider key ``fake``, registered
through the provider registry), so what is measured is the runtime's own overhead: queueing,
leases, persistence, tools and streaming. The stack is the real one (`soong-agent up`: Valkey,
storage-writer, task-wal, memory-extraction, gateway and 2 run-workers as processes). Each turn is
posted with the same bus messages the gateway sends and awaited on the run's event stream.

Printed last: one JSON line with turns_per_s_1x200, turn_p50_ms_1x200, turn_p99_ms_1x200,
turns_per_s_50x10, turn_p50_ms_50x10, turn_p99_ms_50x10 and db_bytes_per_turn.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

from agent_core.config import load_settings  # noqa: E402
from agent_core.ids import new_id, new_session_id  # noqa: E402
from agent_core.runqueue import RunEventReader, SessionQueue, submit_message  # noqa: E402
from agent_core.service import ServiceContext  # noqa: E402
from agent_core.storage_client import StorageClient  # noqa: E402
from agent_core.types.protocol import TextBlock  # noqa: E402
from tests.conftest import start_stack, stop_stack  # noqa: E402


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def _db_bytes(home: Path) -> int:
    """Bytes of every database file after checkpointing its WAL into it (read-only inspection)."""
    dbs = [home / "sessions.sqlite", *sorted((home / "sessions.sqlite.shards").glob("*.sqlite"))]
    for db in dbs:
        conn = sqlite3.connect(db, timeout=10)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    files = [*dbs, *(Path(f"{db}-wal") for db in dbs)]
    return sum(f.stat().st_size for f in files if f.exists())


class Driver:
    """Creates sessions and runs turns through the bus, as the gateway does."""

    def __init__(self, home: Path) -> None:
        url = json.loads((home / "run" / "stack.json").read_text())["redis_url"]
        settings = load_settings(env={"SOONG_AGENT_HOME": str(home), "SOONG_REDIS_URL": url})
        self.ctx = ServiceContext(settings, "bench", new_id("cmd"))
        self.storage = StorageClient(self.ctx.rpc, self.ctx.names)
        self.queue = SessionQueue(self.ctx.redis, self.ctx.names)
        self.reader = RunEventReader(self.ctx.redis, self.ctx.names)
        self.home = home

    async def session(self) -> str:
        sid = new_session_id()
        receipt = await self.storage.create_session(
            sid, account_id="bench", cwd=str(self.home), root_agent_id=new_id("agent")
        )
        assert receipt.ok, receipt.error
        return sid

    async def turn(self, sid: str, i: int) -> float:
        started = time.perf_counter()
        submitted = await submit_message(
            self.storage,
            self.queue,
            account_id="bench",
            session_id=sid,
            content=[TextBlock(text=f"turn {i}: " + "q" * 200)],
        )
        finished = None
        async for item in self.reader.follow(sid, submitted.run_id, block_ms=10_000):
            if item is not None and item[1].type == "run_finished":
                finished = item[1]
        if finished is None or finished.status != "completed":
            error = finished.error.model_dump() if finished and finished.error else None
            raise RuntimeError(
                f"run {submitted.run_id} ended {finished and finished.status}: {error}"
            )
        return time.perf_counter() - started

    async def workload(self, sessions: int, turns: int) -> dict[str, float]:
        sids = [await self.session() for _ in range(sessions)]
        latencies: list[float] = []

        async def one(sid: str) -> None:
            for i in range(turns):
                latencies.append(await self.turn(sid, i))

        await self.turn(await self.session(), 0)  # warm-up, not counted
        started = time.perf_counter()
        await asyncio.gather(*(one(s) for s in sids))
        wall = time.perf_counter() - started
        return {
            "turns_per_s": round(sessions * turns / wall, 1),
            "p50_ms": round(statistics.median(latencies) * 1000, 2),
            "p99_ms": round(_pct(latencies, 0.99) * 1000, 2),
        }


async def measure(home: Path) -> dict[str, Any]:
    driver = Driver(home)
    await driver.ctx.rpc.start()
    try:
        before = _db_bytes(home)
        single = await driver.workload(1, 200)
        many = await driver.workload(50, 10)
        turns = 200 + 500 + 2
        grown = _db_bytes(home) - before
    finally:
        await driver.ctx.rpc.stop()
        await driver.ctx.redis.aclose()
    return {
        "bench": "runs",
        "turns_per_s_1x200": single["turns_per_s"],
        "turn_p50_ms_1x200": single["p50_ms"],
        "turn_p99_ms_1x200": single["p99_ms"],
        "turns_per_s_50x10": many["turns_per_s"],
        "turn_p50_ms_50x10": many["p50_ms"],
        "turn_p99_ms_50x10": many["p99_ms"],
        "db_bytes_per_turn": round(grown / turns),
        "workers": 2,
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="soong-bench-runs-") as tmp:
        home = Path(tmp) / "home"
        stack = start_stack(home, workers=2, extra_env={"SOONG_MODEL_PROVIDER": "fake"})
        try:
            result = asyncio.run(measure(home))
        except Exception:
            errors = [
                line for line in stack.log().splitlines() if "ERROR" in line or "Error" in line
            ]
            print("\n".join(errors[-40:]), file=sys.stderr)
            raise
        finally:
            stop_stack(stack.process)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
