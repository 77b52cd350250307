"""CPU time of a process tree, read from ``/proc`` (Linux), grouped by role.

A stack started by ``soong-agent up`` is one supervisor process with its children: the embedded
Valkey and one ``agent_core.cli serve <service>`` process per service instance. Each process's
``utime + stime`` (all its threads) is read before and after a phase; the difference is the CPU it
spent on that phase.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROLES", "cpu_seconds", "descendants", "role_of", "stack_cpu", "tree_cpu"]

_TICK = os.sysconf("SC_CLK_TCK")

# Role of a process by what its command line runs (``serve run_worker`` → "workers", …).
ROLES = {
    "gateway": "gateway",
    "run_worker": "workers",
    "storage_writer": "writer",  # the primary and its warm standby
    "memory_extraction": "memory",
    "task_wal": "task_wal",
}


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone meanwhile
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0.0 when it is gone)."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    # After the command name: state is field 3, utime field 14, stime field 15.
    return (int(fields[11]) + int(fields[12])) / _TICK


def descendants(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def role_of(pid: int, root: int) -> str:
    """The role of a stack process: a service's, ``valkey``, ``supervisor`` or ``other``."""
    if pid == root:
        return "supervisor"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "other"
    words = [a.decode(errors="replace") for a in argv]
    if any("valkey-server" in w or "redis-server" in w for w in words):
        return "valkey"
    if "serve" in words:
        name = words[words.index("serve") + 1] if words.index("serve") + 1 < len(words) else ""
        return ROLES.get(name, "other")
    # A service's own child (the storage-writer's search index process) counts as the service.
    fields = _stat(pid)
    parent = int(fields[1]) if fields is not None else root
    return "other" if parent in (root, 0, 1) else role_of(parent, root)


def tree_cpu(pid: int) -> float:
    """CPU seconds so far of ``pid`` and every process below it (a service and its children)."""
    return sum(cpu_seconds(p) for p in descendants(pid))


def stack_cpu(root: int) -> dict[int, tuple[str, float]]:
    """Each process of the tree under ``root``: its role and CPU seconds so far."""
    return {pid: (role_of(pid, root), cpu_seconds(pid)) for pid in descendants(root)}
