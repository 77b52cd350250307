"""The network between the harness's hosts (``harness``): a bridge in this machine's root
namespace, a veth pair to each host's network namespace, and cuts made with iptables.

Links and rules carry the pid of the process that made them, so a run clears what dead runs left
behind before it starts (:func:`_clear_stale`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shlex
import subprocess
import time

import psutil

from tests.allowed_networks import ALLOWED

__all__ = ["Fabric", "run"]

_COMMENT = "soong-multinode"


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command of the host's tools; its failure (with ``check``) fails the test."""
    done = subprocess.run(argv, check=False, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"{shlex.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def _wait_unshared(pid: int) -> None:
    """Until ``pid`` has left this process's network namespace (``unshare`` has run)."""
    ours = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + 10
    while os.readlink(f"/proc/{pid}/ns/net") == ours:
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} never entered a network namespace of its own")
        time.sleep(0.002)


def _alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


class Fabric:
    """The bridge that joins the hosts to the root namespace, and the cuts between them.

    The root side of the bridge is the engines' address (``.1``); host ``i`` is ``.(10 + i)``.
    Links and rules carry this process's pid, so :meth:`up` can clear those of a dead run first.
    """

    def __init__(self, second: int = 0) -> None:
        # The tag starts with this process's pid (how a later run tells a dead run's links);
        # ``second`` numbers further fabrics of one process, up at once.
        pid = os.getpid()
        self.tag = f"{pid}" if not second else f"{pid}i{second}"
        self.bridge = f"mnb{self.tag}"
        slot = pid + 7919 * second
        self.network = ipaddress.IPv4Network(f"10.{200 + slot % 50}.{(slot // 50) % 250}.0/24")
        self.engine_ip = str(self.network.network_address + 1)
        self._cut: set[str] = set()
        self._veths: set[str] = set()

    def host_ip(self, index: int) -> str:
        """Host ``index``'s address (0-based, up to 200 hosts)."""
        return str(self.network.network_address + 10 + index)

    def up(self) -> None:
        """Create the bridge (after clearing what dead runs of the harness left behind)."""
        _clear_stale()
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{self.engine_ip}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        ALLOWED.append(self.network)  # the tests' connection guard lets it through

    def attach(self, pid: int, index: int) -> str:
        """Join the network namespace of ``pid`` to the bridge (its side is named ``eth0``);
        the host's address (the host sets it on its side itself)."""
        veth = f"mnv{self.tag}x{index}"
        _wait_unshared(pid)  # else the link's far end would land in this namespace
        # A link of this name is an earlier cluster's of this process, whose host namespace
        # the kernel has not torn down yet (it does so in the background): ours to remove.
        run("ip", "link", "del", veth, check=False)
        self._veths.add(veth)
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", str(pid))
        run("ip", "link", "set", veth, "master", self.bridge)
        run("ip", "link", "set", veth, "up")
        return self.host_ip(index)

    def _rules(self, ip: str) -> list[list[str]]:
        tag = ["-m", "comment", "--comment", f"{_COMMENT}-{self.tag}", "-j", "DROP"]
        return [
            ["INPUT", "-s", ip, *tag],
            ["OUTPUT", "-d", ip, *tag],
            ["FORWARD", "-s", ip, *tag],  # to the other hosts over the bridge
            ["FORWARD", "-d", ip, *tag],
        ]

    def cut(self, ip: str) -> None:
        """Drop every packet from and to ``ip`` (as a pulled cable: no reset, no answer)."""
        if ip in self._cut:
            return
        for rule in self._rules(ip):
            run("iptables", "-I", *rule)
        self._cut.add(ip)

    def heal(self, ip: str) -> None:
        """Undo :meth:`cut`."""
        if ip not in self._cut:
            return
        for rule in self._rules(ip):
            run("iptables", "-D", *rule, check=False)
        self._cut.discard(ip)

    def down(self) -> None:
        """Remove the cuts, the hosts' links and the bridge. A link would go with its host's
        namespace, but the kernel frees a namespace in the background, after its last process:
        a next cluster of this process, whose links have the same names, met them still there."""
        for ip in list(self._cut):
            self.heal(ip)
        for veth in sorted(self._veths):
            run("ip", "link", "del", veth, check=False)
        self._veths.clear()
        run("ip", "link", "del", self.bridge, check=False)
        with contextlib.suppress(ValueError):
            ALLOWED.remove(self.network)


def _clear_stale() -> None:
    """Bridges and iptables rules of harness runs whose process is gone."""
    for line in run("ip", "-o", "link", "show", "type", "bridge").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        owner = name[3:].split("i")[0]
        if name.startswith("mnb") and owner.isdigit() and not _alive(int(owner)):
            run("ip", "link", "del", name, check=False)
    for line in run("iptables", "-S").stdout.splitlines():
        if f"{_COMMENT}-" not in line or not line.startswith("-A "):
            continue
        owner = line.split(f"{_COMMENT}-")[1].split()[0].strip('"').split("i")[0]
        if owner.isdigit() and not _alive(int(owner)):
            run("iptables", *shlex.split("-D " + line[3:]), check=False)
