"""The one hook runner: a command, its JSON input on stdin, its answer on stdout, bounded.

A hook is started with ``asyncio.create_subprocess_exec`` — an argv, never a shell unless the
hook's config asked for ``/bin/sh -c`` itself — in a session and process group of its own.
Whatever ends it (its exit, the timeout, too much output, the caller's cancellation), the whole
group gets SIGKILL, so a hook leaves nothing running behind. Its stdout is read up to
:data:`MAX_STDOUT` bytes (more is an error), its stderr up to :data:`MAX_STDERR` (the rest is
read and dropped). What the exit means (README, "Hooks"):

* ``0``: go on; stdout is empty or one :class:`HookOutput` JSON object;
* ``2``: block; stderr is the reason;
* anything else — another code, a signal, the timeout, a binary that cannot be started, stdout
  that is not a valid ``HookOutput`` or is too long — is a failure, and the hook's ``on_error``
  decides (:mod:`agent_core.hooks.pipeline`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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

    def done(
        outcome: Outcome,
        detail: str = "",
        *,
        output: HookOutput | None = None,
        exit_code: int | None = None,
        stderr: str = "",
    ) -> HookRun:
        took = round((time.monotonic() - started) * 1000, 2)
        return HookRun(outcome, output, exit_code, stderr, took, detail)

    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:  # a missing or non-executable binary, a missing folder
        return done("not_started", f"could not start {argv[0]!r}: {type(exc).__name__}")
    out, err = bytearray(), bytearray()
    oversized = False

    async def feed() -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(stdin)
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # a hook need not read its input
        finally:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    async def read_out() -> None:
        nonlocal oversized
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(_READ_CHUNK):
            out.extend(chunk)
            if len(out) > MAX_STDOUT:
                oversized = True
                _kill_group(proc.pid)  # no need to wait for the rest of it
                return

    async def read_err() -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(_READ_CHUNK):
            if len(err) < MAX_STDERR:
                err.extend(chunk[: MAX_STDERR - len(err)])

    pumps = [asyncio.create_task(f()) for f in (feed, read_out, read_err)]
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout_s):
                await proc.wait()
        except TimeoutError:
            timed_out = True
        _kill_group(proc.pid)
        await asyncio.wait(pumps, timeout=_DRAIN_GRACE_S)
    finally:
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        _kill_group(proc.pid)  # also on cancellation: nothing of the hook outlives it
        if proc.returncode is None:
            await proc.wait()
    code = proc.returncode
    stderr = err.decode("utf-8", errors="replace")
    if oversized:
        return done("oversized_output", f"stdout exceeded {MAX_STDOUT} bytes", stderr=stderr)
    if timed_out:
        return done("timeout", f"no exit within {timeout_s:g} s", stderr=stderr)
    if code == 2:
        return done("exit_2", exit_code=2, stderr=stderr)
    if code != 0:
        what = f"exit code {code}" if code is not None and code > 0 else f"signal {-(code or 0)}"
        return done("exit_code", what, exit_code=code, stderr=stderr)
    try:
        text = out.decode("utf-8")
        output = HookOutput.model_validate_json(text) if text.strip() else HookOutput()
    except (UnicodeDecodeError, ValidationError) as exc:
        detail = "stdout is not UTF-8"
        if isinstance(exc, ValidationError):
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "(output)"
            detail = f"stdout is not a valid hook output: {where}: {first['msg']}"
        return done("invalid_output", detail, exit_code=0, stderr=stderr)
    return done("ok", output=output, exit_code=0, stderr=stderr)
