"""Run throughput and turn latency of the whole stack, with the peers' workload.

One turn = one user message → the scripted model asks for one ``lookup`` tool call (~300 B) → it
answers ~1 KB. The model is the in-process scripted adapter (provider key ``fake``, registered
through the provider registry), so what is measured is the runtime's own overhead: queueing,
leases, persistence, tools and streaming. The stack is the real one (`soong-agent up`: Valkey,
storage-writer, task-wal, memory-extraction, gateway and 2 run-workers as processes). Each turn is
posted through the gateway's HTTP API (``POST /v1/sessions/{id}/messages`` with ``stream=true``,
one keep-alive connection per session, as an SDK keeps one) and awaited on the run's SSE stream
until ``run_finished``; a turn's latency is that whole request.

Printed last: one JSON line with turns_per_s_1x200, turn_p50_ms_1x200, turn_p99_ms_1x200,
turns_per_s_50x10, turn_p50_ms_50x10, turn_p99_ms_50x10 and db_bytes_per_turn (both workloads'
growth ÷ their turns; ``db_bytes_per_turn_1x200`` is the 1 × 200 session's alone). The ``*_bus``
keys are 1 × 200 once more with each turn posted as the gateway's bus messages and read from the
run's Redis stream directly — what the HTTP layer adds is the difference.
``cpu_ms_per_turn_50x10`` is the CPU the whole stack spent on the 50 × 10 phase (``utime + stime``
of every stack process, read from ``/proc`` before and after it) divided by its turns; the
``cpu_ms_per_turn_50x10_<role>`` keys split it by process (gateway, workers, writer — primary and
standby —, memory, task_wal, valkey, supervisor). ``client_cpu_ms_per_turn_50x10`` is this
driver's own CPU (HTTP and SSE client), not part of the stack's. ``--quick`` runs the 50 × 10 phase
alone on one stack (for side-by-side comparisons).
``turns_per_s_50x10_observed`` is 50 × 10 once more, on a second stack started right after the
first, with JSON logs, every service's metrics scraped each second and tracing exported over OTLP
to a local receiver (``tests/fakes/otlp_receiver.py``); ``observed_ratio_50x10`` is the ratio.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared"), str(ROOT / "bench")]

import httpx  # noqa: E402
from helpers.proc_cpu import ROLES, stack_cpu  # noqa: E402
from helpers.sse_client import RawClient  # noqa: E402

from agent_core.config import load_settings  # noqa: E402
from agent_core.ids import new_id, new_session_id  # noqa: E402
from agent_core.runqueue import RunEventReader, SessionQueue, submit_message  # noqa: E402
from agent_core.service import ServiceContext  # noqa: E402
from agent_core.storage_client import StorageClient  # noqa: E402
from agent_core.types.protocol import TextBlock  # noqa: E402
from tests.conftest import start_stack, stop_stack  # noqa: E402
from tests.fakes.otlp_receiver import OtlpReceiver  # noqa: E402

CONFIG = """
[gateway]
rate_limit_per_s = 1000000.0
rate_limit_burst = 1000000
max_sse_streams_per_key = 1000
"""


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


def _question(i: int) -> str:
    return f"turn {i}: " + "q" * 200


class Driver:
    """Creates sessions and runs turns: through the gateway's HTTP API, or (``bus=True``) with
    the bus messages the gateway sends."""

    def __init__(self, home: Path, gateway_url: str, api_key: str) -> None:
        url = json.loads((home / "run" / "stack.json").read_text())["redis_url"]
        settings = load_settings(env={"SOONG_AGENT_HOME": str(home), "SOONG_REDIS_URL": url})
        self.ctx = ServiceContext(settings, "bench", new_id("cmd"))
        self.storage = StorageClient(self.ctx.rpc, self.ctx.names)
        self.queue = SessionQueue(self.ctx.bus, self.ctx.names)
        self.reader = RunEventReader(self.ctx.redis, self.ctx.names)
        self.home = home
        self.gateway_url = gateway_url
        self.api_key = api_key

    async def session(self, client: RawClient) -> str:
        status, body = await client.json("POST", "/v1/sessions", {})
        assert status == 201, body
        return str(body["session_id"])

    async def turn(self, client: RawClient, sid: str, i: int) -> float:
        started = time.perf_counter()
        finished = None
        path = f"/v1/sessions/{sid}/messages"
        async for frame in client.stream(path, {"text": _question(i), "stream": True}):
            if frame.event == "run_finished":
                finished = json.loads(frame.data)
        if finished is None or finished["status"] != "completed":
            raise RuntimeError(f"run ended {finished}")
        return time.perf_counter() - started

    async def bus_turn(self, sid: str, i: int) -> float:
        started = time.perf_counter()
        submitted = await submit_message(
            self.storage,
            self.queue,
            account_id="bench",
            session_id=sid,
            content=[TextBlock(text=_question(i))],
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

    async def workload(
        self, sessions: int, turns: int, *, bus: bool = False, meter: CpuMeter | None = None
    ) -> dict[str, float]:
        """Turns/s and latency of ``sessions`` × ``turns`` (sessions created and one warm-up
        turn run first, not counted); ``meter`` reads the CPU of the counted part only."""
        clients = [RawClient(self.gateway_url, self.api_key) for _ in range(sessions + 1)]
        try:
            if bus:
                sids = []
                for _ in range(sessions + 1):
                    sid = new_session_id()
                    receipt = await self.storage.create_session(
                        sid, account_id="bench", cwd="workspace", root_agent_id=new_id("agent")
                    )
                    assert receipt.ok, receipt.error
                    sids.append(sid)
            else:
                sids = [await self.session(c) for c in clients]
            latencies: list[float] = []

            async def one(k: int) -> None:
                for i in range(turns):
                    if bus:
                        latencies.append(await self.bus_turn(sids[k], i))
                    else:
                        latencies.append(await self.turn(clients[k], sids[k], i))

            # warm-up, not counted: one turn in a session of its own
            await (self.bus_turn(sids[-1], 0) if bus else self.turn(clients[-1], sids[-1], 0))
            if meter is not None:
                meter.start()
            started = time.perf_counter()
            await asyncio.gather(*(one(k) for k in range(sessions)))
            wall = time.perf_counter() - started
            if meter is not None:
                meter.stop(sessions * turns)
        finally:
            for c in clients:
                await c.close()
        return {
            "turns_per_s": round(sessions * turns / wall, 1),
            "p50_ms": round(statistics.median(latencies) * 1000, 2),
            "p99_ms": round(_pct(latencies, 0.99) * 1000, 2),
        }


class CpuMeter:
    """The CPU per turn (ms) a phase cost each role of the stack's processes, their sum
    (``total``) and this driver's own (``client``), in :attr:`per_turn` after :meth:`stop`."""

    def __init__(self, home: Path) -> None:
        self.root = int(json.loads((home / "run" / "stack.json").read_text())["pid"])
        self.per_turn: dict[str, float] = {}

    def start(self) -> None:
        self._before, self._client = stack_cpu(self.root), time.process_time()

    def stop(self, turns: int) -> None:
        after, client = stack_cpu(self.root), time.process_time() - self._client
        per_role = dict.fromkeys([*ROLES.values(), "valkey", "supervisor", "other"], 0.0)
        for pid, (role, spent) in after.items():
            # A process that started during the phase (a restart) counts from zero.
            per_role[role] += spent - (self._before[pid][1] if pid in self._before else 0.0)
        self.per_turn = {role: round(s * 1000 / turns, 3) for role, s in per_role.items()}
        self.per_turn["total"] = round(sum(per_role.values()) * 1000 / turns, 3)
        self.per_turn["client"] = round(client * 1000 / turns, 3)


async def cpu_of_workload(
    driver: Driver, sessions: int, turns: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The workload's figures and its :class:`CpuMeter` figures."""
    meter = CpuMeter(driver.home)
    result = await driver.workload(sessions, turns, meter=meter)
    return result, meter.per_turn


def _cpu_keys(cpu: dict[str, float]) -> dict[str, float]:
    keys = {"cpu_ms_per_turn_50x10": cpu["total"]}
    keys |= {
        f"cpu_ms_per_turn_50x10_{r}": v for r, v in cpu.items() if r not in ("total", "client")
    }
    keys["client_cpu_ms_per_turn_50x10"] = cpu["client"]
    return keys


async def measure_quick(home: Path, gateway_url: str, api_key: str) -> dict[str, Any]:
    """The 50 × 10 phase alone, with its CPU per turn."""
    driver = Driver(home, gateway_url, api_key)
    await driver.ctx.rpc.start()
    try:
        many, cpu = await cpu_of_workload(driver, 50, 10)
    finally:
        await driver.ctx.rpc.stop()
        await driver.ctx.bus.aclose()
    return {
        "bench": "runs",
        "turns_per_s_50x10": many["turns_per_s"],
        "turn_p50_ms_50x10": many["p50_ms"],
        **_cpu_keys(cpu),
    }


async def measure(home: Path, gateway_url: str, api_key: str) -> dict[str, Any]:
    driver = Driver(home, gateway_url, api_key)
    await driver.ctx.rpc.start()
    try:
        before = _db_bytes(home)
        single = await driver.workload(1, 200)
        after_single = _db_bytes(home)
        many, cpu = await cpu_of_workload(driver, 50, 10)
        turns = 200 + 500 + 2
        grown = _db_bytes(home) - before
        bus = await driver.workload(1, 200, bus=True)
    finally:
        await driver.ctx.rpc.stop()
        await driver.ctx.bus.aclose()
    return {
        "bench": "runs",
        "turns_per_s_1x200": single["turns_per_s"],
        "turn_p50_ms_1x200": single["p50_ms"],
        "turn_p99_ms_1x200": single["p99_ms"],
        "turns_per_s_50x10": many["turns_per_s"],
        "turn_p50_ms_50x10": many["p50_ms"],
        "turn_p99_ms_50x10": many["p99_ms"],
        **_cpu_keys(cpu),
        "db_bytes_per_turn": round(grown / turns),
        # One long session: what each further turn adds, without the fixed cost of a session's
        # tables (the 50 short sessions pay ~11 KB each of b-tree roots and half-full pages).
        "db_bytes_per_turn_1x200": round((after_single - before) / 201),
        "turns_per_s_1x200_bus": bus["turns_per_s"],
        "turn_p50_ms_1x200_bus": bus["p50_ms"],
        "workers": 2,
    }


async def measure_observed(home: Path, gateway_url: str, api_key: str) -> dict[str, Any]:
    """50 × 10 again, on a stack with JSON logs and traces exported to a local receiver, its
    metrics scraped every second as a Prometheus server would."""
    driver = Driver(home, gateway_url, api_key)
    await driver.ctx.rpc.start()
    stop = asyncio.Event()
    scraper = asyncio.create_task(_scrape_every_second(home, gateway_url, stop))
    try:
        return await driver.workload(50, 10)
    finally:
        stop.set()
        await scraper
        await driver.ctx.rpc.stop()
        await driver.ctx.bus.aclose()


async def _scrape_every_second(home: Path, gateway_url: str, stop: asyncio.Event) -> None:
    ops = json.loads((home / "run" / "stack.json").read_text())["ops"]
    urls = [f"{u}/metrics" for u in ops.values()]
    async with httpx.AsyncClient(timeout=5) as client:
        while not stop.is_set():
            for url in urls:
                (await client.get(url)).raise_for_status()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await stop.wait()


def _on_stack(env: dict[str, str], work: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="soong-bench-runs-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / "config.toml").write_text(CONFIG)
        stack = start_stack(home, workers=2, extra_env={"SOONG_MODEL_PROVIDER": "fake", **env})
        try:
            return dict(asyncio.run(work(home, stack.gateway_url, stack.api_key)))
        except Exception:
            errors = [
                line for line in stack.log().splitlines() if "ERROR" in line or "Error" in line
            ]
            print("\n".join(errors[-40:]), file=sys.stderr)
            raise
        finally:
            stop_stack(stack.process)


def main() -> None:
    if "--quick" in sys.argv[1:]:
        print(json.dumps(_on_stack({}, measure_quick)))
        return
    result = _on_stack({}, measure)
    with OtlpReceiver() as receiver:
        observed_env = {"SOONG_LOG_FORMAT": "json", "SOONG_OTLP_ENDPOINT": receiver.endpoint}
        observed = _on_stack(observed_env, measure_observed)
        spans = len(receiver.spans)
    # Observability on (JSON logs, metrics scraped each second, every span exported over OTLP to
    # a local receiver), the same workload, right after: the cost of seeing what runs.
    result["turns_per_s_50x10_observed"] = observed["turns_per_s"]
    result["turn_p50_ms_50x10_observed"] = observed["p50_ms"]
    result["observed_ratio_50x10"] = round(observed["turns_per_s"] / result["turns_per_s_50x10"], 3)
    result["spans_exported_50x10_observed"] = spans
    print(json.dumps(result))


if __name__ == "__main__":
    main()
