"""A small process supervisor for ``soong-agent up``.

Children's output goes to standard output line by line: each line prefixed with the child's name
(``[gateway] …``), or, when the logs are JSON, each line a JSON object as it came (the record
names its service and instance) and any other line (a crash's last words) wrapped into one, so
that every line of ``up`` is JSON and ``jq`` reads them as they come. Children are are restarted with exponential backoff when they die, and are shut down
in order on SIGINT/SIGTERM (front doors first, the storage-writer last) with a SIGKILL fallback.
A child that exits with ``EXIT_CONFIG`` (its configuration cannot work: restarting it would fail
the same way) stops the whole stack; :attr:`Supervisor.config_error` names it.
On Linux each child also gets ``PR_SET_PDEATHSIG`` so that it dies if the supervisor is killed
with SIGKILL and cannot clean up: no orphan is ever left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from agent_core.service.runner import EXIT_CONFIG

__all__ = ["ChildSpec", "Supervisor", "as_json_line", "die_with_parent"]

log = logging.getLogger("soong.supervisor")

# A child that dies is restarted at once (after the shortest backoff): the storage-writer and the
# bus are on every request's path, so the stack must serve again within seconds of a crash. Only
# a child that keeps dying soon after its start backs off, up to the longest backoff.
_BACKOFF_START_S = 0.1
_BACKOFF_MAX_S = 5.0
_HEALTHY_AFTER_S = 5.0  # a child that lived this long restarts from the shortest backoff


@dataclass
class ChildSpec:
    """One supervised process. Lower ``stop_order`` stops first."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    stop_order: int = 0


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this process when its parent dies (no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def as_json_line(source: str, message: str, level: str = "INFO") -> bytes:
    """A line that is not JSON (a child's last words, ``up``'s own announcements) as one JSON
    log record, in the shape of the services' own (``ts``, ``level``, ``service``, ``message``)."""
    doc = {
        "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "level": level,
        "service": source,
        "message": message,
    }
    return (json.dumps(doc, ensure_ascii=False) + "\n").encode()


class _Child:
    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.proc: asyncio.subprocess.Process | None = None
        self.restarts = 0


class Supervisor:
    """Runs children until :meth:`stop`; see the module docstring."""

    def __init__(
        self,
        children: Sequence[ChildSpec],
        *,
        stop_timeout_s: float = 15.0,
        json_lines: bool = False,
    ) -> None:
        self._children = [_Child(c) for c in children]
        self._json_lines = json_lines
        self._stopping = asyncio.Event()
        self._stop_timeout_s = stop_timeout_s
        self._pumps: set[asyncio.Task[None]] = set()
        self.config_error: str | None = None  # the child that stopped the stack, if one did

    def stop(self) -> None:
        """Ask for a clean shutdown (idempotent; safe from a signal handler)."""
        self._stopping.set()

    async def run(self) -> None:
        """Start every child, keep them alive, and return after all have exited."""
        async with asyncio.TaskGroup() as tg:
            for child in self._children:
                tg.create_task(self._keep_alive(child), name=f"supervise:{child.spec.name}")
            await self._stopping.wait()
            await self._shutdown()
        if self._pumps:  # let the last log lines of the children through
            await asyncio.wait(self._pumps, timeout=2)

    async def _keep_alive(self, child: _Child) -> None:
        backoff = _BACKOFF_START_S
        while not self._stopping.is_set():
            started = time.monotonic()
            await self._spawn(child)
            assert child.proc is not None
            code = await child.proc.wait()
            if self._stopping.is_set():
                return
            if code == EXIT_CONFIG:
                log.error(
                    "%s cannot start with this configuration (see its error above); "
                    "stopping: fix the configuration and start again",
                    child.spec.name,
                )
                self.config_error = child.spec.name
                self.stop()
                return
            lived = time.monotonic() - started
            backoff = (
                _BACKOFF_START_S if lived > _HEALTHY_AFTER_S else min(backoff * 2, _BACKOFF_MAX_S)
            )
            child.restarts += 1
            log.warning(
                "%s exited with %s after %.1fs; restarting in %.1fs",
                child.spec.name,
                code,
                lived,
                backoff,
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await self._stopping.wait()

    async def _spawn(self, child: _Child) -> None:
        env = {**os.environ, **child.spec.env, "PYTHONUNBUFFERED": "1"}
        child.proc = await asyncio.create_subprocess_exec(
            *child.spec.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            preexec_fn=die_with_parent,
            start_new_session=True,  # a terminal Ctrl-C reaches only us; we stop children in order
        )
        pump = asyncio.create_task(
            self._pump(child.spec.name, child.proc, self._json_lines),
            name=f"logs:{child.spec.name}",
        )
        self._pumps.add(pump)
        pump.add_done_callback(self._pumps.discard)

    @staticmethod
    async def _pump(name: str, proc: asyncio.subprocess.Process, json_lines: bool) -> None:
        assert proc.stdout is not None
        prefix = f"[{name}] ".encode()
        out = sys.stdout.buffer
        while line := await proc.stdout.readline():
            if not json_lines:
                out.write(prefix + line)
            elif line.startswith(b"{"):  # a record of the child's JSON logging, as it came
                out.write(line if line.endswith(b"\n") else line + b"\n")
            else:
                out.write(as_json_line(name, line.decode("utf-8", "replace").rstrip("\n")))
            out.flush()

    async def _shutdown(self) -> None:
        orders = sorted({c.spec.stop_order for c in self._children})
        for order in orders:
            group = [c for c in self._children if c.spec.stop_order == order]
            await self._terminate(group)

    async def _terminate(self, group: list[_Child]) -> None:
        alive = [c for c in group if c.proc is not None and c.proc.returncode is None]
        for child in alive:
            assert child.proc is not None
            with contextlib.suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGTERM)
        waits = [asyncio.create_task(c.proc.wait()) for c in alive if c.proc is not None]
        if not waits:
            return
        _, pending = await asyncio.wait(waits, timeout=self._stop_timeout_s)
        for child in alive:
            if child.proc is not None and child.proc.returncode is None:
                log.warning("%s did not stop in time; killing it", child.spec.name)
                with contextlib.suppress(ProcessLookupError):
                    child.proc.kill()
        if pending:
            await asyncio.wait(pending, timeout=5)
