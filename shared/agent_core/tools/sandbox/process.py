"""Running one command under limits: capped output, a wall clock, a write quota, a kill that
reaches the whole tree.

The command is started in a session and process group of its own. Whatever ends the call — its
normal exit, the timeout, the write quota, the caller's cancellation — the group gets SIGKILL.
Under bubblewrap that group is bubblewrap itself: its death takes the call's PID namespace with it
(``--die-with-parent``), so a process that left the group (``setsid``) dies all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from agent_core.tools.sandbox.limits import CappedBuffer, SandboxLimits

__all__ = ["SandboxResult", "StopReason", "WriteWatch", "run_limited"]

_READ_CHUNK: Final = 64 * 1024
# After the group is killed its pipes close at once; anything still holding them (a process that
# escaped the group with the sandbox off) is waited for only this long.
_DRAIN_GRACE_S: Final = 2.0
_WATCH_MIN_INTERVAL_S: Final = 0.25
# What one directory entry costs the disk at least (an inode and its name), so that a flood of
# empty files counts against the quota too.
_ENTRY_BYTES: Final = 4096

StopReason = Literal["timeout", "write_quota", "disk_full"]


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """How a call ended and what it printed (capped)."""

    exit_code: int | None  # negative: killed by that signal (as in asyncio)
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    duration_s: float
    stopped_for: StopReason | None = None  # the call was killed by a limit the sandbox watches

    @property
    def timed_out(self) -> bool:
        """Whether the wall clock ran out."""
        return self.stopped_for == "timeout"

    @property
    def ok(self) -> bool:
        """Whether the command exited 0 within every limit."""
        return self.exit_code == 0 and self.stopped_for is None


class WriteWatch:
    """Disk use of the writable areas against a quota, and the disk's free space."""

    def __init__(self, dirs: Sequence[Path], limits: SandboxLimits) -> None:
        self._dirs = list(dirs)
        self._quota = limits.write_quota_bytes
        self._min_free = limits.min_free_disk_bytes
        self._baseline = 0

    def used(self) -> int:
        """Bytes the areas take on disk (each entry at least one block); links not followed."""
        total = 0
        stack = [str(d) for d in self._dirs]
        while stack:
            with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):
                        st = entry.stat(follow_symlinks=False)
                        total += max(st.st_blocks * 512, _ENTRY_BYTES)
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                    if self._quota is not None and total > self._baseline + self._quota:
                        return total  # enough to decide: the rest need not be walked
        return total

    def disk_full(self) -> bool:
        """Whether the disk of the first area has less than the reserve left."""
        try:
            st = os.statvfs(self._dirs[0])
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < self._min_free

    def start(self) -> StopReason | None:
        """Measure the baseline; a disk already at its reserve refuses the call."""
        if self._quota is not None:
            self._baseline = self.used()
        return "disk_full" if self.disk_full() else None

    async def watch(self) -> StopReason:
        """Return once a limit is crossed (the caller kills the call); runs until cancelled."""
        interval = _WATCH_MIN_INTERVAL_S
        while True:
            await asyncio.sleep(interval)
            started = time.monotonic()
            if self._quota is not None:
                used = await asyncio.to_thread(self.used)
                if used > self._baseline + self._quota:
                    return "write_quota"
            if self.disk_full():
                return "disk_full"
            # A huge tree is walked less often: the watch costs at most a fifth of a core.
            interval = max(_WATCH_MIN_INTERVAL_S, 4 * (time.monotonic() - started))


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _pump(stream: asyncio.StreamReader, sink: CappedBuffer) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        sink.feed(chunk)


async def _first_stop(
    proc: asyncio.subprocess.Process, limits: SandboxLimits, watch: WriteWatch | None
) -> StopReason | None:
    """Wait for the process to exit or a limit to be crossed, whichever comes first."""
    waits: list[asyncio.Task[StopReason | None]] = []
    try:
        waits.append(asyncio.create_task(_exit(proc)))
        if watch is not None:
            waits.append(asyncio.create_task(watch.watch()))
        done, _ = await asyncio.wait(
            waits, timeout=limits.timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        if not done:
            return "timeout"
        return next(iter(done)).result()
    finally:
        for task in waits:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


async def _exit(proc: asyncio.subprocess.Process) -> None:
    await proc.wait()


async def run_limited(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    limits: SandboxLimits,
    cwd: Path | None = None,
    watch: WriteWatch | None = None,
    pass_fds: Sequence[int] = (),
) -> SandboxResult:
    """Run ``argv`` to its end or to the first limit; never raises for the command's failures.

    Cancellation kills the whole group, then propagates.
    """
    out, err = CappedBuffer(limits.output_cap_bytes), CappedBuffer(limits.output_cap_bytes)
    started = time.monotonic()
    refused = await asyncio.to_thread(watch.start) if watch is not None else None
    if refused is not None:
        return SandboxResult(None, "", "", 0, 0, 0.0, stopped_for=refused)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        pumps = (
            asyncio.create_task(_pump(proc.stdout, out)),
            asyncio.create_task(_pump(proc.stderr, err)),
        )
        try:
            stopped = await _first_stop(proc, limits, watch)
            _kill_group(proc.pid)
            await asyncio.wait(pumps, timeout=_DRAIN_GRACE_S)
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
    finally:
        # Also on cancellation: nothing of the call may outlive it.
        _kill_group(proc.pid)
        if proc.returncode is None:
            await proc.wait()
    return SandboxResult(
        exit_code=proc.returncode,
        stdout=out.render(),
        stderr=err.render(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        duration_s=time.monotonic() - started,
        stopped_for=stopped,
    )
