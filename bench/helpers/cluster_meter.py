"""What the multi-host benches meter on a harness stack: every host's processes' CPU by service,
the bus's own CPU and its primaries' command count, and the machine's CPU, between two reads.

Used by ``bench/scale.py``; the stack is a :class:`tests.multinode.cluster.Cluster` (one Valkey,
a Sentinel set or a Cluster on its fabric). Older revisions' harnesses have no topology-aware
client (``bus_client``) or pid list (``bus_pids``): the functions fall back to the one Valkey, so
``make bench-compare`` can meter them too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.proc_cpu import cpu_seconds
from redis.asyncio import Redis

from agent_core.bus import make_redis

if TYPE_CHECKING:
    from tests.multinode.cluster import Cluster

__all__ = ["Meter", "bus_client", "bus_pids", "machine_cpu", "role_of"]


class Meter:
    """CPU of the hosts' processes and of Valkey, and Valkey's command count, between marks."""

    def __init__(self, cl: Cluster) -> None:
        self.cl = cl
        self.redis = bus_client(cl)

    async def read(self) -> dict[str, float]:
        roles: dict[str, float] = {}
        for host in self.cl.hosts.values():
            for pid in host.pids():
                roles[role_of(pid)] = roles.get(role_of(pid), 0.0) + cpu_seconds(pid)
        hosts = sum(roles.values())
        return {
            "hosts": hosts,
            "valkey": sum(cpu_seconds(pid) for pid in bus_pids(self.cl)),
            "cmds": float(await self._commands()),
            "all_cpu": machine_cpu(),
            **{f"role:{role}": cpu for role, cpu in roles.items()},
        }

    async def _commands(self) -> int:
        """Every command the bus's primaries executed so far (scripts' own calls included; a
        replica's replayed stream is left out, so one node and a Cluster compare)."""
        topology = getattr(self.cl, "topology", None)
        if topology is None:
            stats = await self.redis.info("commandstats")
            return sum(int(v["calls"]) for v in stats.values())
        calls = 0
        for server in topology.servers:
            if getattr(server, "sentinel", False):
                continue
            with server.client() as node:
                if node.info("replication")["role"] == "master":
                    calls += sum(int(v["calls"]) for v in node.info("commandstats").values())
        return calls


def bus_client(cl: Cluster) -> Redis:
    """A client of the bus (the harness's topology-aware one where it has it)."""
    if hasattr(cl, "bus_client"):
        return cl.bus_client()
    return make_redis(cl.valkey.local_url)  # type: ignore[union-attr]


def bus_pids(cl: Cluster) -> list[int]:
    if hasattr(cl, "bus_pids"):
        return list(cl.bus_pids())
    assert cl.valkey is not None and cl.valkey.process is not None
    return [cl.valkey.process.pid]


def role_of(pid: int) -> str:
    """The service a host's process runs (``serve <name>``), else ``other`` (the host's shell)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "other"
    if b"serve" in argv:
        return argv[argv.index(b"serve") + 1].decode()
    return "other"


def machine_cpu() -> float:
    """CPU seconds the whole machine spent (all cores, user + system), from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system = (int(f) for f in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")
