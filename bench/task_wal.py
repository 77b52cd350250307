"""task-wal throughput and latency through the real bus, next to this machine's bare fsync rate.

Starts its own Valkey and runs task-wal as a subprocess (``soong-agent serve task_wal``), as
deployed, once with ``tasks.fsync = true`` and once with ``false``. Clients are closed-loop
coroutines in this process sharing one task list (so concurrent changes can share an fsync); each
walks its own tasks through add → claim → note → complete and waits for every acknowledgement.
The bare rate is a loop of ``write`` (one WAL-sized line) + ``fsync`` on the same file system,
run just before and just after the fsync-on measurement (their mean is reported).

The last line printed is one JSON object: ``changes_per_s_fsync``, ``changes_per_s_nofsync``,
``p99_ms_fsync``, ``bare_fsync_per_s``, ``ratio_fsync`` (= changes/s with fsync ÷ bare rate).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

from agent_core.bus import BusNames  # noqa: E402
from agent_core.bus.contracts.tasks import TaskScope  # noqa: E402
from agent_core.config import load_settings  # noqa: E402
from agent_core.ids import new_id, new_session_id  # noqa: E402
from agent_core.service import ServiceContext, ping_service  # noqa: E402
from agent_core.service.valkey import EmbeddedValkey  # noqa: E402
from agent_core.tasks.client import TaskClient  # noqa: E402
from agent_core.types.task_commands import (  # noqa: E402
    AddTask,
    ClaimTask,
    CompleteTask,
    CreateList,
    TaskCommand,
    UpdateTask,
)

CLIENTS = 48  # the bus client's connection pool holds 100
WARMUP_S = 1.0
MEASURE_S = 6.0
BARE_S = 2.0
AGENT = "agent_bench"


def bare_fsync_rate(directory: Path, seconds: float) -> float:
    """write+fsync per second of a ~300-byte line appended to one file."""
    path = directory / "bare.bin"
    line = b"x" * 300 + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            os.write(fd, line)
            os.fsync(fd)
            count += 1
    finally:
        os.close(fd)
        path.unlink()
    return count / elapsed


def serve(home: Path, redis_url: str, names: BusNames) -> subprocess.Popen[bytes]:
    """task-wal as a subprocess with its own home."""
    env = {
        **os.environ,
        "SOONG_AGENT_HOME": str(home),
        "SOONG_REDIS_URL": redis_url,
        "SOONG_NAMESPACE": names.namespace,
        "SOONG_LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "agent_core.cli", "serve", "task_wal", "--instance", "0"],
        cwd=ROOT,
        env=env,
    )


async def measure(root: Path, redis_url: str, *, fsync: bool) -> tuple[float, float, float]:
    """(acknowledged changes/s, p50 ms, p99 ms) with ``tasks.fsync = fsync``."""
    names = BusNames(f"bench{int(fsync)}{os.getpid() % 10000}")
    home = root / f"home-{fsync}"
    project = root / f"project-{fsync}"
    home.mkdir()
    project.mkdir()
    # The project folder is a configured root: task-wal writes only in the server's own folders.
    (home / "config.toml").write_text(
        f'[tasks]\nfsync = {str(fsync).lower()}\n[projects]\nroots = {{ bench = "{project}" }}\n'
    )
    proc = serve(home, redis_url, names)
    env = {"SOONG_AGENT_HOME": str(home), "SOONG_REDIS_URL": redis_url}
    settings = load_settings(env={**env, "SOONG_NAMESPACE": names.namespace})
    ctx = ServiceContext(settings, "bench", "0")
    await ctx.rpc.start()
    try:
        await ping_service(ctx, "task_wal", timeout_s=30)
        client = TaskClient(ctx.rpc, ctx.names, timeout_s=30)
        session_id, scope = new_session_id(), TaskScope(account_id="bench", project="bench")
        common = {"session_id": session_id, "list_name": "bench", "agent_id": AGENT}
        await client.execute(CreateList(**common), scope=scope)
        latencies: list[float] = []
        state = {"measuring": False, "stop": False}

        async def run_client(n: int) -> None:
            while not state["stop"]:
                task_id = new_id("task")
                steps: list[TaskCommand] = [
                    AddTask(**common, task_id=task_id, title=f"bench task of client {n}"),
                    ClaimTask(**common, task_id=task_id),
                    UpdateTask(**common, task_id=task_id, note="halfway there"),
                    CompleteTask(**common, task_id=task_id, note="done"),
                ]
                for step in steps:
                    start = time.perf_counter()
                    await client.execute(step, scope=scope)
                    if state["measuring"]:
                        latencies.append(time.perf_counter() - start)

        clients = [asyncio.create_task(run_client(n)) for n in range(CLIENTS)]
        await asyncio.sleep(WARMUP_S)
        state["measuring"] = True
        started = time.perf_counter()
        await asyncio.sleep(MEASURE_S)
        state["measuring"] = False
        elapsed = time.perf_counter() - started
        state["stop"] = True
        await asyncio.gather(*clients)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        await ctx.rpc.stop()
        await ctx.bus.aclose()
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return len(ms) / elapsed, statistics.median(ms), p99


async def main() -> None:
    """Run both configurations and the bare fsync loop; print the figures."""
    with tempfile.TemporaryDirectory(prefix="bench-task-wal-") as tmp:
        root = Path(tmp)
        valkey = EmbeddedValkey(root / "valkey", appendonly=False)
        (root / "valkey").mkdir()
        valkey.start()
        try:
            # Before and after the service runs: the disk may be shared, so take the mean.
            bare_before = bare_fsync_rate(root, BARE_S / 2)
            on, on_p50, on_p99 = await measure(root, valkey.url, fsync=True)
            bare_after = bare_fsync_rate(root, BARE_S / 2)
            off, off_p50, off_p99 = await measure(root, valkey.url, fsync=False)
        finally:
            valkey.stop()
    bare = (bare_before + bare_after) / 2
    print(f"bare write+fsync: {bare:,.0f}/s (before {bare_before:,.0f}, after {bare_after:,.0f})")
    print(f"fsync on : {on:,.0f} changes/s, p50 {on_p50:.2f} ms, p99 {on_p99:.2f} ms")
    print(f"fsync off: {off:,.0f} changes/s, p50 {off_p50:.2f} ms, p99 {off_p99:.2f} ms")
    figures = {
        "changes_per_s_fsync": round(on, 1),
        "changes_per_s_nofsync": round(off, 1),
        "p99_ms_fsync": round(on_p99, 2),
        "p99_ms_nofsync": round(off_p99, 2),
        "bare_fsync_per_s": round(bare, 1),
        "ratio_fsync": round(on / bare, 3),
        "clients": CLIENTS,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
