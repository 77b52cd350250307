"""The limits of one sandboxed call, and the capped buffer that keeps its output.

Kernel resource limits are set by ``prlimit`` (util-linux) right before the command is executed,
inside the sandbox: ``RLIMIT_NPROC`` in particular must be set after bubblewrap created the call's
user namespace, where it counts the processes of this call alone (set before, it would count every
process of the worker's user and could refuse to start the sandbox at all).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["CappedBuffer", "SandboxLimits"]

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits of one call; ``None`` leaves a limit unset.

    - ``timeout_s``: wall clock; the whole process tree is killed when it runs out.
    - ``cpu_s``: CPU seconds per process (default: the timeout rounded up, plus one).
    - ``memory_bytes``: address space per process (``RLIMIT_AS``).
    - ``file_size_bytes``: the largest file a process may write (``RLIMIT_FSIZE``).
    - ``max_processes``: processes and threads of the call (``RLIMIT_NPROC`` in its own user
      namespace; not applied with the sandbox off, where it would count the worker's user).
    - ``write_quota_bytes``: bytes the call may add to ``scratchpad/`` and ``output/`` together.
    - ``min_free_disk_bytes``: the call is killed when the disk holding the workspace gets this
      close to full, whoever filled it.
    - ``tmp_bytes``: size of the call's private ``/tmp`` (memory-backed).
    - ``output_cap_bytes``: stdout and stderr kept, each (head and tail; the rest is counted).
    - ``nice``: scheduling niceness, so that busy code yields the CPU to the services.
    """

    timeout_s: float = 60.0
    cpu_s: int | None = None
    memory_bytes: int | None = 2048 * _MIB
    file_size_bytes: int | None = 256 * _MIB
    max_processes: int | None = 64
    write_quota_bytes: int | None = 1024 * _MIB
    min_free_disk_bytes: int = 256 * _MIB
    tmp_bytes: int = 64 * _MIB
    output_cap_bytes: int = 256 * 1024
    nice: int = 10

    def with_timeout(self, timeout_s: float | None) -> SandboxLimits:
        """These limits with the timeout lowered to ``timeout_s`` (never raised)."""
        if timeout_s is None or timeout_s >= self.timeout_s:
            return self
        return replace(self, timeout_s=timeout_s)

    def prlimit_args(self, *, nproc: bool) -> list[str]:
        """``prlimit`` options setting soft and hard limits (CPU: hard one second later, so the
        soft limit's SIGXCPU comes first and SIGKILL follows)."""
        cpu = self.cpu_s if self.cpu_s is not None else math.ceil(self.timeout_s) + 1
        args = [f"--cpu={cpu}:{cpu + 1}", "--core=0:0"]
        if self.memory_bytes is not None:
            args.append(f"--as={self.memory_bytes}:{self.memory_bytes}")
        if self.file_size_bytes is not None:
            args.append(f"--fsize={self.file_size_bytes}:{self.file_size_bytes}")
        if nproc and self.max_processes is not None:
            args.append(f"--nproc={self.max_processes}:{self.max_processes}")
        return args


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
