"""``RunningRuns.watch``: a watcher hears each run that registers or leaves, once, until it
stops watching."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_core.runtime import RunningRuns


async def _forever() -> Any:
    await asyncio.Event().wait()


async def test_a_watcher_hears_each_register_and_leave_until_it_unwatches() -> None:
    runs = RunningRuns()
    heard: list[tuple[str, bool]] = []
    unwatch = runs.watch(lambda run_id, running: heard.append((run_id, running)))
    task = asyncio.create_task(_forever())
    try:
        runs.register("run_a", task)
        runs.unregister("run_a")
        runs.unregister("run_a")  # not registered any more: nothing to tell
        runs.unregister("run_never")
        unwatch()
        runs.register("run_b", task)
        runs.unregister("run_b")
    finally:
        task.cancel()
    assert heard == [("run_a", True), ("run_a", False)]


async def test_a_watcher_that_unwatches_while_told_leaves_the_others_told() -> None:
    runs = RunningRuns()
    heard: list[str] = []
    unwatch_first = runs.watch(lambda run_id, _: unwatch_first())
    runs.watch(lambda run_id, _: heard.append(run_id))
    task = asyncio.create_task(_forever())
    try:
        runs.register("run_a", task)
        runs.unregister("run_a")
    finally:
        task.cancel()
    assert heard == ["run_a", "run_a"]
