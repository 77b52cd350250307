"""The shared service runner: health pings, graceful shutdown, exit codes."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from agent_core.bus import BusNames, Delivery
from agent_core.bus.broker import make_broker  # publishes as another FastStream app would
from agent_core.bus.contracts.runs import RUNS_MESSAGE, RunNudge
from agent_core.config import load_settings
from agent_core.service import (
    EXIT_BUS_UNREACHABLE,
    EXIT_SUBSCRIBER_DIED,
    ServiceContext,
    ServiceParts,
    ping_service,
    run_service,
)
from agent_core.service.valkey import find_free_port
from tests.conftest import REPO
from tests.integration.bus.helpers import wait_for


def _serve(name: str, redis_url: str, names: BusNames, home: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SOONG_REDIS_URL": redis_url,
        "SOONG_NAMESPACE": names.namespace,
        "SOONG_AGENT_HOME": str(home),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "agent_core.cli", "serve", name, "--instance", "0"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


async def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("process did not exit in time")
        await asyncio.sleep(0.05)
    return proc.returncode


async def _context(redis_url: str, names: BusNames, home: Path) -> ServiceContext:
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(home),
            "SOONG_REDIS_URL": redis_url,
            "SOONG_NAMESPACE": names.namespace,
        }
    )
    ctx = ServiceContext(settings, "tester", "0")
    await ctx.rpc.start()
    return ctx


async def test_service_answers_ping_and_stops_cleanly_on_sigterm(
    redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    proc = _serve("task_wal", redis_url, names, tmp_path)
    ctx = await _context(redis_url, names, tmp_path)
    try:
        reply = await ping_service(ctx, "task_wal", timeout_s=20)
        assert reply.ok and reply.service == "task_wal" and reply.instance == "0", reply
        assert all(reply.subscribers.values())
        proc.send_signal(signal.SIGTERM)
        assert await _wait_exit(proc, 20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        await ctx.rpc.stop()
        await ctx.bus.aclose()


async def test_service_whose_subscriber_died_exits_non_zero(
    redis_url: str, redis: Redis, names: BusNames, tmp_path: Path
) -> None:
    proc = _serve("memory_extraction", redis_url, names, tmp_path)
    ctx = await _context(redis_url, names, tmp_path)
    try:
        await ping_service(ctx, "memory_extraction", timeout_s=20)
        # Deleting the stream removes its group: the reader stops for good (NOGROUP) while
        # PING still succeeds. The watchdog must notice and exit non-zero.
        await redis.delete(names.health("memory_extraction"))
        code = await _wait_exit(proc, 20)
        output = proc.stdout.read().decode() if proc.stdout else ""
        assert code == EXIT_SUBSCRIBER_DIED, output
        assert "subscriber(s) stopped" in output
    finally:
        if proc.poll() is None:
            proc.kill()
        await ctx.rpc.stop()
        await ctx.bus.aclose()


async def test_unreachable_bus_exits_with_a_clear_message(names: BusNames, tmp_path: Path) -> None:
    proc = _serve("task_wal", f"redis://:s3cret@127.0.0.1:{find_free_port()}", names, tmp_path)
    code = await _wait_exit(proc, 30)
    output = proc.stdout.read().decode() if proc.stdout else ""
    assert code == EXIT_BUS_UNREACHABLE
    assert "bus unreachable" in output
    assert "s3cret" not in output
    assert "Traceback" not in output


async def test_graceful_shutdown_finishes_in_flight_work(
    redis_url: str, redis: Redis, names: BusNames, tmp_path: Path
) -> None:
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(tmp_path),
            "SOONG_REDIS_URL": redis_url,
            "SOONG_NAMESPACE": names.namespace,
        }
    )
    started, finished = asyncio.Event(), asyncio.Event()

    async def slow(message: Any, _: Delivery) -> None:
        started.set()
        await asyncio.sleep(0.5)
        finished.set()

    async def factory(ctx: ServiceContext) -> ServiceParts:
        return ServiceParts(
            consumers=[
                ctx.consumer(
                    names.runs,
                    "workers",
                    RUNS_MESSAGE,
                    handler=slow,
                    options=ctx.default_options(),
                )
            ]
        )

    stop = asyncio.Event()
    service = asyncio.create_task(
        run_service(factory, settings, "slowpoke", "0", stop=stop, configure_logging=False)
    )
    broker = make_broker(redis_url)
    await broker.connect()
    await broker.publish(RunNudge(session_id="s"), stream=names.runs)
    await broker.stop()
    async with asyncio.timeout(20):
        await started.wait()
    stop.set()  # mid-handler
    async with asyncio.timeout(30):
        assert await service == 0
    assert finished.is_set()
    await wait_for(lambda: _no_pending(redis, names.runs, "workers"))


async def _no_pending(redis: Redis, stream: str, group: str) -> bool:
    return int((await redis.xpending(stream, group))["pending"]) == 0


_SLOW_START = """
import asyncio, sys
from agent_core.config import load_settings
from agent_core.service import ServiceParts, run_service

async def factory(ctx):
    async def slow_recovery():
        print("starting", flush=True)
        await asyncio.sleep(3)
    return ServiceParts(on_start=[slow_recovery])

sys.exit(asyncio.run(run_service(factory, load_settings(), "slow", "0")))
"""


async def test_sigterm_during_start_up_still_stops_cleanly(
    redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "SOONG_REDIS_URL": redis_url,
        "SOONG_NAMESPACE": names.namespace,
        "SOONG_AGENT_HOME": str(tmp_path),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_START],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"starting"
    proc.send_signal(signal.SIGTERM)  # while the service is still starting
    assert await _wait_exit(proc, 30) == 0, proc.stdout.read().decode()


_REPORT_FREEZE = """
import asyncio, gc, sys
from agent_core.config import load_settings
from agent_core.service import ServiceParts, run_service

async def factory(ctx):
    async def report(stop):
        print("frozen", gc.get_freeze_count(), flush=True)
        stop.set()
    return ServiceParts(tasks=[report])

sys.exit(asyncio.run(run_service(factory, load_settings(), "freezer", "0")))
"""


async def test_a_service_process_freezes_its_start_up_heap(
    redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    """A service with the process to itself moves what start-up made into the collector's
    permanent generation, so full collections no longer scan it."""
    env = {
        **os.environ,
        "SOONG_REDIS_URL": redis_url,
        "SOONG_NAMESPACE": names.namespace,
        "SOONG_AGENT_HOME": str(tmp_path),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _REPORT_FREEZE], cwd=REPO, env=env, capture_output=True, timeout=60
    )
    out = proc.stdout.decode()
    assert proc.returncode == 0, out + proc.stderr.decode()
    frozen = [line for line in out.splitlines() if line.startswith("frozen ")]
    assert frozen and int(frozen[0].split()[1]) > 10_000, out


async def test_an_in_process_service_leaves_the_collector_alone(
    redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    """In-process (tests), the interpreter is shared: nothing is frozen."""
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(tmp_path),
            "SOONG_REDIS_URL": redis_url,
            "SOONG_NAMESPACE": names.namespace,
        }
    )
    before = gc.get_freeze_count()
    seen: list[int] = []

    async def factory(ctx: ServiceContext) -> ServiceParts:
        async def report(stop: asyncio.Event) -> None:
            seen.append(gc.get_freeze_count())
            stop.set()

        return ServiceParts(tasks=[report])

    async with asyncio.timeout(30):
        code = await run_service(factory, settings, "shared", "0", configure_logging=False)
    assert code == 0 and seen == [before]
