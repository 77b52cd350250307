"""Driving one attempt at a run: the one way main runs and child runs are run and stopped.

:func:`drive` runs an attempt's work — reading where the run starts, building its loop, running
it — as one task that a cancel request can stop, and turns however that ends into the run's
:class:`Ending`: the loop's own end; ``cancelled`` after a cancel (``aborted_tools`` while tools
ran, else ``aborted_streaming``); ``failed`` with ``budget_exceeded`` when the wall-clock budget
ran out; ``failed`` with the redacted error payload of any exception — an expected
:class:`AgentCoreError` or anything else (``internal_error``, the exception kept for the debug-mode
traceback). Every end carries the turns, usage and path of what the attempt did so far
(:class:`RunProgress`). Two things are not an end: a newer attempt owning the run
(:class:`Fenced`: stop writing, end nothing) and the caller itself being cancelled (the
``CancelledError`` goes on once the task has stopped; a main run then stays in flight for a
takeover, a child run ends with :meth:`RunProgress.cancelled` before it goes on).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_core.bus.contracts.refusals import FENCED
from agent_core.errors import AgentCoreError, ErrorPayload, StorageError
from agent_core.runtime.ending import Ending, cancelled_reason, ending
from agent_core.runtime.loop import AgentLoop
from agent_core.types.enums import EndReason, Role, RunStatus
from agent_core.types.protocol import ToolCallBlock
from agent_core.types.runtime import Node, RunHandle

__all__ = [
    "Fenced",
    "RunFailure",
    "RunProgress",
    "RunWatcher",
    "RunningRuns",
    "drive",
    "failure_payload",
]

# How long a cancel request for a run that has no task here yet is remembered.
_EARLY_CANCEL_TTL_S = 60.0


class Fenced(Exception):
    """A newer attempt owns the run (the writer refused ours): stop writing, end nothing."""


class RunFailure(AgentCoreError):
    """A run cannot go on (its worker was lost, its attempts ran out, its message has no place)."""

    error_type = "run_error"


def failure_payload(exc: BaseException) -> ErrorPayload:
    """The redacted payload of an exception that ends a run. An unexpected exception says its
    type only: its text may hold user data or secrets (the traceback goes to the debug artifact)."""
    if isinstance(exc, AgentCoreError):
        return exc.to_payload()
    return ErrorPayload(
        type="internal_error",
        code="internal_error",
        message=f"the run failed unexpectedly ({type(exc).__name__})",
    )


@dataclass
class RunProgress:
    """What an attempt has done so far — the path it stands on, its turns, its loop once built —
    so that an end after an exception, a cancel or a timeout says as much as it can."""

    handle: RunHandle
    path: list[Node] = field(default_factory=list)
    turns: int = 0
    loop: AgentLoop | None = None

    @property
    def nodes(self) -> list[Node]:
        """The path the attempt stands on now (its loop's, once the loop runs)."""
        return self.loop.nodes if self.loop is not None else self.path

    def ending(
        self,
        status: RunStatus,
        reason: EndReason,
        *,
        error: ErrorPayload | None = None,
        exception: BaseException | None = None,
    ) -> Ending:
        """The end of the run after what the attempt did (the loop's figures once it runs)."""
        if self.loop is not None:
            return self.loop.ending(status, reason, error=error, exception=exception)
        return ending(
            self.handle,
            self.path,
            status,
            reason,
            turns=self.turns,
            error=error,
            exception=exception,
        )

    def failed(self, error: ErrorPayload, exception: BaseException | None = None) -> Ending:
        """The run ends ``failed`` with ``error``."""
        return self.ending(RunStatus.FAILED, EndReason.FAILED, error=error, exception=exception)

    def cancelled(self) -> Ending:
        """The end of the run after a cancel: ``aborted_tools`` while tools ran (or when the
        path ends on tool calls without results), ``aborted_streaming`` otherwise."""
        if self.loop is not None:
            return self.loop.cancelled()
        return self.ending(RunStatus.CANCELLED, cancelled_reason(_ends_on_calls(self.path)))

    async def run_loop(
        self,
        loop: AgentLoop,
        path: Sequence[Node],
        *,
        turns_done: int = 0,
        timeout_s: float | None = None,
        rerun_calls: bool = False,
    ) -> Ending:
        """Run ``loop`` from ``path`` within the run's wall-clock budget ``timeout_s``
        (``rerun_calls``: see :meth:`AgentLoop.run`)."""
        self.loop = loop
        try:
            async with asyncio.timeout(timeout_s) as budget:
                return await loop.run(path, turns_done=turns_done, rerun_calls=rerun_calls)
        except TimeoutError:
            if not budget.expired():
                raise
            error = ErrorPayload(
                type="budget_exceeded",
                code="budget_exceeded",
                message=f"the run exceeded its wall_clock budget ({timeout_s})",
                details={"limit": "wall_clock", "value": timeout_s},
            )
            return self.failed(error)


def _ends_on_calls(path: Sequence[Node]) -> bool:
    last = path[-1] if path else None
    return (
        last is not None
        and last.role is Role.ASSISTANT
        and any(isinstance(b, ToolCallBlock) for b in last.content)
    )


# Told ``(run_id, True)`` when a run's task registers and ``(run_id, False)`` when it leaves.
RunWatcher = Callable[[str, bool], None]


class RunningRuns:
    """The run tasks of one worker process, where a cancel request finds them.

    A cancel that arrives before its run's task is registered (the run is being claimed, a child
    run is being created) is remembered for a while and applied when the task registers.
    Watchers (:meth:`watch`) are told of each run that registers or leaves, as it happens: what
    follows the running runs (the cancel listener's sharded subscriptions) need not rescan them.
    """

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[Ending]] = {}
        self._early: dict[str, float] = {}
        self._watchers: list[RunWatcher] = []

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._tasks

    @property
    def run_ids(self) -> list[str]:
        """The runs whose tasks are registered here now."""
        return list(self._tasks)

    def cancel(self, run_id: str) -> bool:
        """Cancel ``run_id``'s task; ``False`` if it has none here (the request is remembered).

        Idempotent: a task already being cancelled is not cancelled again (a second request, or
        the flag poll finding what the signal already did, must not interrupt how it ends).
        """
        task = self._tasks.get(run_id)
        if task is None:
            now = time.monotonic()
            self._early = {r: t for r, t in self._early.items() if now - t < _EARLY_CANCEL_TTL_S}
            self._early[run_id] = now
            return False
        if not task.cancelling():
            task.cancel()
        return True

    def register(self, run_id: str, task: asyncio.Task[Ending]) -> None:
        """Make ``task`` cancellable by ``run_id`` (at once, if a cancel came before it) and
        tell the watchers it runs."""
        self._tasks[run_id] = task
        if self._early.pop(run_id, None) is not None:
            task.cancel()
        self._tell(run_id, running=True)

    def unregister(self, run_id: str) -> None:
        """From now on a cancel of ``run_id`` finds nothing (its end is being written); the
        watchers are told, once, if it was registered."""
        if self._tasks.pop(run_id, None) is not None:
            self._tell(run_id, running=False)

    def watch(self, watcher: RunWatcher) -> Callable[[], None]:
        """Tell ``watcher`` of every run that registers or leaves from now on, synchronously,
        until the returned function is called. With :attr:`run_ids` read in the same step (no
        ``await`` between), the watcher misses no run."""
        self._watchers.append(watcher)

        def unwatch() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return unwatch

    def _tell(self, run_id: str, *, running: bool) -> None:
        for watcher in list(self._watchers):  # a watcher may unwatch while told
            watcher(run_id, running)


async def drive(
    progress: RunProgress,
    work: Callable[[RunProgress], Coroutine[Any, Any, Ending]],
    runs: RunningRuns,
    *,
    cancel_requested: Callable[[], Awaitable[bool]] | None = None,
) -> Ending:
    """Run ``work(progress)`` as ``progress.handle``'s run task and return the run's end,
    whatever happens (see the module docstring). ``cancel_requested``: asked once the task is
    registered, for a cancel this process cannot have seen. Raises :class:`Fenced`, and
    ``CancelledError`` when the caller is cancelled."""
    run_id = progress.handle.run_id
    task: asyncio.Task[Ending] = asyncio.create_task(work(progress), name=f"run:{run_id}")
    runs.register(run_id, task)
    try:
        if cancel_requested is not None and await cancel_requested():
            task.cancel()
        await asyncio.wait({task})
    except asyncio.CancelledError:
        # The caller is cancelled (the worker stops, a parent run is cancelled): stop the run's
        # task too and let the cancellation go on; the caller decides what that means.
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    finally:
        runs.unregister(run_id)  # a cancel from now on finds nothing: the end is decided
    if task.cancelled():
        return progress.cancelled()
    exc = task.exception()
    if exc is None:
        return task.result()
    if isinstance(exc, StorageError) and exc.code in FENCED:
        raise Fenced(exc.message) from exc
    return progress.failed(failure_payload(exc), None if isinstance(exc, AgentCoreError) else exc)
