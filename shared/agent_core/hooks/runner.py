"""The one hook runner: a command, its JSON input on stdin, its answer on stdout, bounded.

A hook is started as an argv — never through a shell unless the hook's config asked for
``/bin/sh -c`` itself — in a session and process group of its own. Whatever ends it (its exit,
the timeout, too much output, the caller's cancellation), the whole group gets SIGKILL, so a hook
leaves nothing running behind. Its stdout is read up to :data:`MAX_STDOUT` bytes (more is an
error), its stderr up to :data:`MAX_STDERR` (the rest is read and dropped). What the exit means
(README, "Hooks"):

* ``0``: go on; stdout is empty or one :class:`HookOutput` JSON object;
* ``2``: block; stderr is the reason;
* anything else — another code, a signal, the timeout, a binary that cannot be started, stdout
  that is not a valid ``HookOutput`` or is too long — is a failure, and the hook's ``on_error``
  decides (:mod:`agent_core.hooks.pipeline`).

Why not ``asyncio.create_subprocess_exec``: the workers run uvloop, whose spawn *forks* the
worker — copying its page tables, ~20 ms for a 200 MB process, on every tool call with a hook —
where :class:`subprocess.Popen` uses ``vfork`` (under 1 ms whatever the size; ``bench/hooks.py``).
So the process is started by ``Popen`` and its pipes and its exit (a pidfd) are watched by the
running event loop, whichever loop that is: nothing blocks and no thread is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from pydantic import ValidationError

from agent_core.types.protocol import HookOutput

__all__ = ["MAX_STDERR", "MAX_STDOUT", "HookRun", "Outcome", "run_hook"]

MAX_STDOUT: Final = 64 * 1024
MAX_STDERR: Final = 8 * 1024
_READ_CHUNK: Final = 64 * 1024
# After the group is killed its pipes close at once; a process that left the group and still
# holds them is waited for only this long.
_DRAIN_GRACE_S: Final = 1.0

Outcome = Literal[
    "ok", "exit_2", "exit_code", "timeout", "not_started", "invalid_output", "oversized_output"
]


@dataclass(frozen=True, slots=True)
class HookRun:
    """How one execution ended: its outcome, its parsed answer (``ok`` only), its stderr (cut to
    :data:`MAX_STDERR`) and what went wrong in words (failures only)."""

    outcome: Outcome
    output: HookOutput | None
    exit_code: int | None
    stderr: str
    duration_ms: float
    detail: str = ""

    @property
    def failed(self) -> bool:
        """Whether the hook failed (its ``on_error`` decides), as opposed to answering."""
        return self.outcome not in ("ok", "exit_2")


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass
class _Exchange:
    """One hook process's pipes and exit, watched by the event loop (see the module docstring)."""

    proc: subprocess.Popen[bytes]
    stdin: bytes
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    oversized: bool = False
    _sent: int = 0
    _fds: set[int] = field(default_factory=set)  # fds the loop watches
    _pidfd: int | None = None

    def __post_init__(self) -> None:
        self.exited: asyncio.Future[None] = self.loop.create_future()
        self.drained: asyncio.Future[None] = self.loop.create_future()
        self._open = 2  # stdout and stderr until their EOF

    def start(self) -> None:
        """Watch stdin, stdout, stderr and the exit."""
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
        self._watch(proc.stdout.fileno(), self._read, True, self.out, MAX_STDOUT)
        self._watch(proc.stderr.fileno(), self._read, True, self.err, MAX_STDERR)
        self._watch(proc.stdin.fileno(), self._write, False)
        try:
            self._pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # no pidfd (old kernel): poll for the exit
            self.loop.call_later(0.005, self._poll)
        else:
            self._watch(self._pidfd, self._on_exit, True)

    def _watch(self, fd: int, callback: Callable[..., None], read: bool, *args: object) -> None:
        if read:
            self.loop.add_reader(fd, callback, fd, *args)
        else:
            self.loop.add_writer(fd, callback, fd, *args)
        self._fds.add(fd)

    def _unwatch(self, fd: int) -> None:
        if fd in self._fds:
            self._fds.discard(fd)
            self.loop.remove_reader(fd)
            self.loop.remove_writer(fd)

    def _read(self, fd: int, sink: bytearray, cap: int) -> None:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._unwatch(fd)
            self._open -= 1
            if self._open == 0 and not self.drained.done():
                self.drained.set_result(None)
            return
        if sink is self.out:
            sink.extend(chunk)
            if len(sink) > cap:
                self.oversized = True
                _kill_group(self.proc.pid)  # no need to wait for the rest of it
        elif len(sink) < cap:
            sink.extend(chunk[: cap - len(sink)])

    def _write(self, fd: int) -> None:
        try:
            self._sent += os.write(fd, self.stdin[self._sent : self._sent + _READ_CHUNK])
        except BlockingIOError:
            return
        except OSError:  # the hook closed its stdin: it need not read its input
            self._sent = len(self.stdin)
        if self._sent >= len(self.stdin):
            self._unwatch(fd)
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def _on_exit(self, fd: int) -> None:
        self._unwatch(fd)
        if not self.exited.done():
            self.exited.set_result(None)

    def _poll(self) -> None:
        if self.proc.poll() is not None:
            if not self.exited.done():
                self.exited.set_result(None)
        elif not self.exited.done():
            self.loop.call_later(0.01, self._poll)

    def close(self) -> None:
        """Stop watching, close every pipe and the pidfd, reap the (killed) process."""
        for fd in list(self._fds):
            self._unwatch(fd)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        _kill_group(self.proc.pid)
        self.proc.wait()  # dead or killed by now: reaping takes microseconds


async def run_hook(
    argv: Sequence[str],
    stdin: bytes,
    *,
    timeout_s: float,
    env: Mapping[str, str],
    cwd: str | None = None,
) -> HookRun:
    """Run one hook to its end (see the module docstring); never raises for the hook's failures.

    Cancellation kills the hook's whole group, then propagates."""
    started = time.monotonic()
    try:
        # vfork + exec: under a millisecond, and the loop watches the rest (module docstring).
        proc = subprocess.Popen(  # noqa: ASYNC220
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:  # a missing or non-executable binary, a missing folder
        detail = f"could not start {argv[0]!r}: {type(exc).__name__}"
        return HookRun("not_started", None, None, "", _ms_since(started), detail)
    exchange = _Exchange(proc, stdin)
    try:
        timed_out = await _wait(exchange, proc.pid, timeout_s)
    finally:
        exchange.close()  # also on cancellation: nothing of the hook outlives it
    stderr = exchange.err.decode("utf-8", errors="replace")
    outcome, detail, output, code = _judge(exchange, proc.returncode, timed_out, timeout_s)
    return HookRun(outcome, output, code, stderr, _ms_since(started), detail)


def _ms_since(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 2)


async def _wait(exchange: _Exchange, pgid: int, timeout_s: float) -> bool:
    """Wait for the hook's exit (``True``: it timed out), kill its group, drain its pipes."""
    timed_out = False
    exchange.start()
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.shield(exchange.exited)
    except TimeoutError:
        timed_out = True
    _kill_group(pgid)  # what the hook left running goes with it
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_DRAIN_GRACE_S):
            await asyncio.shield(exchange.drained)
    return timed_out


def _judge(
    exchange: _Exchange, code: int | None, timed_out: bool, timeout_s: float
) -> tuple[Outcome, str, HookOutput | None, int | None]:
    """The outcome of a finished hook, what went wrong in words, its answer and exit code."""
    if exchange.oversized:
        return "oversized_output", f"stdout exceeded {MAX_STDOUT} bytes", None, None
    if timed_out:
        return "timeout", f"no exit within {timeout_s:g} s", None, None
    if code == 2:
        return "exit_2", "", None, 2
    if code != 0:
        what = f"exit code {code}" if code is not None and code > 0 else f"signal {-(code or 0)}"
        return "exit_code", what, None, code
    try:
        text = exchange.out.decode("utf-8")
        output = HookOutput.model_validate_json(text) if text.strip() else HookOutput()
    except (UnicodeDecodeError, ValidationError) as exc:
        detail = "stdout is not UTF-8"
        if isinstance(exc, ValidationError):
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "(output)"
            detail = f"stdout is not a valid hook output: {where}: {first['msg']}"
        return "invalid_output", detail, None, 0
    return "ok", "", output, 0
