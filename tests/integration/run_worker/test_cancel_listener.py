"""What the run-worker's cancel listener does when something raises while it listens: the bus
away (a lost connection, a timeout) makes it subscribe again, anything else is a bug and ends it.

The errors are raised where the listener hands a heard signal to the executor, so they come from
inside its loop on the real standalone Valkey; the flag poll is off (it would cancel runs
without any signal), so a run that stops after the error was stopped by a signal the listener
heard on its new subscription.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_core.bus import Bus, BusNames
from agent_core.config import load_settings
from agent_core.ids import new_id
from agent_core.runqueue import SessionQueue
from agent_core.runtime import RunningRuns
from agent_core.service import ServiceContext
from services.run_worker import worker as worker_module
from services.run_worker.worker import RunWorker
from tests.waiting import HangGuard

_GUARD_S = 20.0  # a hang guard, far beyond what any wait here takes


class _Executor:
    """The runs' registry, whose first ``cancel`` raises ``first_error``."""

    def __init__(self, first_error: BaseException) -> None:
        self.runs = RunningRuns()
        self.first_error: BaseException | None = first_error
        self.calls = 0

    def cancel(self, run_id: str) -> bool:
        self.calls += 1
        if (error := self.first_error) is not None:
            self.first_error = None
            raise error
        return self.runs.cancel(run_id)


def _worker(redis_url: str, names: BusNames, home: Path, executor: _Executor) -> RunWorker:
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(home),
            "SOONG_REDIS_URL": redis_url,
            "SOONG_NAMESPACE": names.namespace,
        }
    )
    ctx = ServiceContext(settings, "run_worker", f"t-{secrets.token_hex(3)}")
    return RunWorker(ctx, SessionQueue(ctx.bus, ctx.names), executor)  # type: ignore[arg-type]


async def _forever() -> Any:
    await asyncio.Event().wait()


async def _signal_until(queue: SessionQueue, run_id: str, done: asyncio.Future[Any]) -> None:
    """Cancel ``run_id`` through the queue until ``done`` (a pattern subscription cannot be
    seen, so a signal may come before it exists)."""
    guard = HangGuard(_GUARD_S, f"the listener to act on the cancel of {run_id}")
    while not done.done():
        guard.check()
        await queue.request_cancel(run_id)
        await asyncio.wait({done}, timeout=0.1)


@pytest.mark.parametrize(
    "error",
    [RedisConnectionError("lost"), RedisTimeoutError("slow"), OSError("reset")],
    ids=["connection", "timeout", "os"],
)
async def test_the_bus_away_makes_the_listener_subscribe_again(
    redis_url: str,
    bus: Bus,
    names: BusNames,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: BaseException,
) -> None:
    monkeypatch.setattr(worker_module, "_CANCEL_POLL_S", 3600.0)  # the signal only
    executor = _Executor(error)
    worker = _worker(redis_url, names, tmp_path, executor)
    queue = SessionQueue(bus, names)
    first, second = new_id("run"), new_id("run")
    tasks = {run_id: asyncio.create_task(_forever()) for run_id in (first, second)}
    stop = asyncio.Event()
    listener = asyncio.create_task(worker.listen_for_cancels(stop))
    try:
        executor.runs.register(first, tasks[first])
        # The first signal raises; the flag read after it (the safety net) cancels the run.
        await _signal_until(queue, first, tasks[first])
        assert tasks[first].cancelled()
        executor.runs.unregister(first)
        calls = executor.calls
        # A run that registers later is cancelled through the new subscription.
        executor.runs.register(second, tasks[second])
        await _signal_until(queue, second, tasks[second])
        assert tasks[second].cancelled()
        assert executor.calls > calls
        assert not listener.done()
    finally:
        for task in tasks.values():
            task.cancel()
        stop.set()
        await listener
        await worker.ctx.bus.aclose()


async def test_a_bug_in_the_listener_is_raised_not_retried(
    redis_url: str,
    bus: Bus,
    names: BusNames,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker_module, "_CANCEL_POLL_S", 3600.0)  # the signal only
    executor = _Executor(LookupError("a bug"))
    worker = _worker(redis_url, names, tmp_path, executor)
    queue = SessionQueue(bus, names)
    run_id = new_id("run")
    task = asyncio.create_task(_forever())
    stop = asyncio.Event()
    listener = asyncio.create_task(worker.listen_for_cancels(stop))
    try:
        executor.runs.register(run_id, task)
        await _signal_until(queue, run_id, listener)
        with pytest.raises(LookupError, match="a bug"):
            await listener
        assert executor.calls == 1  # raised at once, never retried
        assert not task.done()
    finally:
        task.cancel()
        stop.set()
        if not listener.done():
            listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await worker.ctx.bus.aclose()
