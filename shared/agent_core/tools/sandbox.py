"""Run a Python script as a limited subprocess in the session's scratchpad.

What the limits are for, and what they are not:

- A wall-clock timeout, and ``RLIMIT_CPU`` / ``RLIMIT_AS`` / ``RLIMIT_FSIZE`` / ``RLIMIT_CORE``
  (and ``RLIMIT_NPROC`` when configured) set in the child before it execs the interpreter.
- Its own session and process group (``start_new_session=True``); the whole group gets SIGKILL
  on timeout, on cancellation and after a normal exit (so a background child cannot outlive the
  call). A process that calls ``setsid()`` itself leaves the group; containing that needs cgroups,
  which this module does not do.
- A minimal environment built from an allow-list: the worker's variables (API keys, Redis URLs)
  never reach the script.
- Output read incrementally and capped per stream (head and tail kept, the middle counted), so a
  script printing gigabytes costs a bounded amount of memory.

It is not a file-system jail: the script runs as the worker's user. Deployments that run untrusted
code put the run-worker in a container.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = ["CappedBuffer", "SandboxConfig", "SandboxLimits", "SandboxResult", "run_python"]

_READ_CHUNK: Final = 64 * 1024
# After the main process is gone and the group killed, pipes close at once; a process that escaped
# the group (setsid) may hold them open, so draining waits only this long.
_DRAIN_GRACE_S: Final = 2.0

# Runs in the child before exec: set the limits, then replace itself with the real interpreter.
# A separate exec (not preexec_fn) because preexec_fn is unsafe in a process with threads.
_LAUNCHER: Final = """
import json, os, resource, sys
limits = json.loads(sys.argv[1])
for name, value in limits.items():
    if value is not None:
        soft, hard = value
        resource.setrlimit(getattr(resource, name), (soft, hard))
os.execv(sys.argv[2], sys.argv[2:])
"""


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits of one script run; ``None`` leaves a limit unset."""

    timeout_s: float = 60.0
    cpu_s: int | None = None  # default: the timeout rounded up, plus one second
    memory_bytes: int | None = 2 * 1024**3
    file_size_bytes: int | None = 256 * 1024**2
    # RLIMIT_NPROC counts every process of the user, not of the script, and root ignores it:
    # off by default, for deployments that run the worker as a dedicated user.
    max_processes: int | None = None
    output_cap_bytes: int = 256 * 1024

    def rlimits(self) -> dict[str, tuple[int, int] | None]:
        """The ``resource`` limits to set in the child (name → (soft, hard))."""
        cpu = self.cpu_s if self.cpu_s is not None else math.ceil(self.timeout_s) + 1

        def pair(value: int | None) -> tuple[int, int] | None:
            return None if value is None else (value, value)

        return {
            # Soft limit sends SIGXCPU, the hard one a second later SIGKILL.
            "RLIMIT_CPU": (cpu, cpu + 1),
            "RLIMIT_AS": pair(self.memory_bytes),
            "RLIMIT_FSIZE": pair(self.file_size_bytes),
            "RLIMIT_NPROC": pair(self.max_processes),
            "RLIMIT_CORE": (0, 0),
        }


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """How the interpreter is started; built from settings once, never from ``os.environ``."""

    python: str = sys.executable
    path_env: str = "/usr/local/bin:/usr/bin:/bin"
    lang: str = "C.UTF-8"
    # Variables a deployment deliberately passes to scripts (e.g. MPLBACKEND=Agg).
    extra_env: Mapping[str, str] = field(default_factory=dict)

    def environment(self, cwd: Path) -> dict[str, str]:
        """The script's whole environment: an allow-list, nothing inherited."""
        env = {
            "PATH": self.path_env,
            "LANG": self.lang,
            "LC_ALL": self.lang,
            "HOME": str(cwd),
            "TMPDIR": str(cwd),
            "PYTHONUNBUFFERED": "1",
        }
        env.update(self.extra_env)
        return env


class CappedBuffer:
    """Keeps the first and the last bytes of a stream up to ``cap`` in all and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._tail_cap = min(cap // 4, 16 * 1024)
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    @property
    def dropped(self) -> int:
        """Bytes seen but not kept."""
        return self.total - len(self._head) - len(self._tail)

    def feed(self, chunk: bytes) -> None:
        """Add a chunk; memory stays bounded by ``cap`` whatever is fed."""
        self.total += len(chunk)
        room = self.cap - self._tail_cap - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self._tail_cap:
            self._tail += chunk[-self._tail_cap :]
            del self._tail[: max(0, len(self._tail) - self._tail_cap)]

    def render(self) -> str:
        """The kept text, with ``[truncated N bytes]`` where the middle was dropped."""
        head = self._head.decode("utf-8", errors="replace")
        if not self.dropped:
            return head + self._tail.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        return f"{head}\n[truncated {self.dropped} bytes]\n{tail}"


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """How a script run ended and what it printed (capped)."""

    exit_code: int | None  # negative: killed by that signal (as in asyncio)
    timed_out: bool
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    duration_s: float

    @property
    def ok(self) -> bool:
        """Whether the script exited 0 within its time."""
        return self.exit_code == 0 and not self.timed_out


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _pump(stream: asyncio.StreamReader, sink: CappedBuffer) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        sink.feed(chunk)


async def _drain(pumps: tuple[asyncio.Task[None], ...]) -> None:
    _, pending = await asyncio.wait(pumps, timeout=_DRAIN_GRACE_S)
    for task in pending:
        task.cancel()


async def run_python(
    code: str,
    *,
    cwd: Path,
    limits: SandboxLimits | None = None,
    config: SandboxConfig | None = None,
) -> SandboxResult:
    """Run ``code`` with ``cwd`` as working directory; never raises for the script's own failures.

    Cancellation kills the whole process group, then propagates.
    """
    limits = limits or SandboxLimits()
    config = config or SandboxConfig()
    out, err = CappedBuffer(limits.output_cap_bytes), CappedBuffer(limits.output_cap_bytes)
    fd, script = tempfile.mkstemp(prefix=".run_python_", suffix=".py", dir=cwd)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(code)
    started = time.monotonic()
    timed_out = False
    try:
        proc = await asyncio.create_subprocess_exec(
            config.python,
            "-E",
            "-s",
            "-c",
            _LAUNCHER,
            json.dumps(limits.rlimits()),
            config.python,
            "-E",
            "-s",
            "-u",
            "-X",
            "utf8",
            script,
            cwd=cwd,
            env=config.environment(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None and proc.stderr is not None
            async with asyncio.TaskGroup() as tg:
                pumps = (
                    tg.create_task(_pump(proc.stdout, out)),
                    tg.create_task(_pump(proc.stderr, err)),
                )
                try:
                    await asyncio.wait_for(proc.wait(), limits.timeout_s)
                except TimeoutError:
                    timed_out = True
                _kill_group(proc.pid)
                await _drain(pumps)
        finally:
            # Also on cancellation: nothing of the group may outlive the call.
            _kill_group(proc.pid)
            if proc.returncode is None:
                await proc.wait()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(script)
    return SandboxResult(
        exit_code=proc.returncode,
        timed_out=timed_out,
        stdout=out.render(),
        stderr=err.render(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        duration_s=time.monotonic() - started,
    )
