"""Hosts on one machine, for the multi-host tests and benches: the bus's Valkey and the hosts.

A *host* is a process group in namespaces of its own, started by ``unshare --mount --net``:

- its own **mount namespace**, with a private tmpfs over the home path. Every host sees the same
  path (``SOONG_AGENT_HOME`` is the same string everywhere, as on real machines) and none sees
  another's files there: nothing is shared by accident through the file system. The logs are
  the one folder that is shared on purpose, so that a test can read them.
- its own **network namespace**, joined to this machine's root namespace by a veth pair on a
  bridge of the harness's (:class:`~tests.multinode.fabric.Fabric`). The engines (Valkey, the scripted model servers)
  listen on the bridge's address; a host reaches them, and the test reaches a host's gateway,
  only through the bridge. :meth:`Fabric.cut` drops a host's packets with iptables (both ways,
  to the engines and to the other hosts), :meth:`Fabric.heal` lets them through again.

A host runs the services given to it, each a ``soong-agent serve NAME`` process. Killing a host
is SIGKILL to its process group, as a power cut would (its tmpfs goes with its namespace).
Every address used is loopback or the harness's own subnet (``10.200.0.0/13``-ish, chosen from
the pid so that two runs on one machine do not collide); nothing leaves the machine.

Here: :class:`HostValkey` (the bus engine of a one-Valkey run), :class:`Service`, :class:`Host`
and :func:`stop_hosts`. The engines and the hosts of one run are put together, started and
stopped by :class:`~tests.multinode.cluster.Cluster` (``tests/multinode/cluster.py``).

Needs root (namespaces, mounts, links, iptables) and iproute2, util-linux and iptables, which
CI's Debian image has.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx
import psutil
import redis

from agent_core.service.valkey import valkey_binary
from tests.multinode.fabric import Fabric, run

__all__ = [
    "GATEWAY_PORT",
    "Host",
    "HostValkey",
    "Service",
    "free_port",
    "stop_hosts",
]

REPO = Path(__file__).resolve().parents[2]
GATEWAY_PORT = 8720  # every host has its own ports: the same number on each, as on real hosts
_OPS_PORT_BASE = 9460
_READY_S = 120.0  # a loaded 2-core machine can take a minute to import a host's services
_BIND_ATTEMPTS = 5


class HostValkey:
    """The bus engine: one Valkey with a password on loopback and on the fabric's address."""

    def __init__(self, data_dir: Path, bind: str, port: int, password: str = "mn-bus-secret"):
        self.data_dir = data_dir
        self.bind = bind
        self.port = port
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL the hosts use (over the fabric)."""
        return f"redis://:{quote(self.password, safe='')}@{self.bind}:{self.port}/0"

    @property
    def local_url(self) -> str:
        """The URL for the test itself (loopback)."""
        return f"redis://:{quote(self.password, safe='')}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it and wait until it answers. A port found free may be taken by another
        process before Valkey binds it (on loopback, or on the fabric's address, where the port
        was checked): Valkey then exits at once, and it is started again on another port."""
        for attempt in range(_BIND_ATTEMPTS):
            if self._started():
                return
            log = (self.data_dir / "valkey.log").read_text()
            if "Address already in use" not in log or attempt == _BIND_ATTEMPTS - 1:
                raise AssertionError(f"valkey did not start:\n{log}")
            self.port = free_port(self.bind)

    def _started(self) -> bool:
        """Whether it came up on ``port``; ``False`` if it exited (its log says why)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "secret.conf"
        conf.write_text(f'requirepass "{self.password}"\n')
        conf.chmod(0o600)
        argv = [
            valkey_binary(),
            str(conf),
            "--port", str(self.port),
            "--bind", "127.0.0.1", self.bind,
            "--dir", str(self.data_dir),
            "--save", "",
            "--appendonly", "no",
            "--loglevel", "warning",
        ]  # fmt: skip
        log = (self.data_dir / "valkey.log").open("wb")
        self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 20
        while True:
            if self.process.poll() is not None:
                return False
            try:
                _ping(self.local_url)
                return True
            except redis.RedisError:
                if self.process.poll() is not None:
                    return False
                if time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError(
                        f"valkey did not answer:\n{(self.data_dir / 'valkey.log').read_text()}"
                    ) from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def _ping(url: str) -> None:
    """One PING, without the bus client's retries: a port another process holds must not keep
    the start waiting (it times out in a second and the start checks its process again)."""
    client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
    try:
        client.ping()
    finally:
        client.close()


@dataclass(frozen=True)
class Service:
    """One ``soong-agent serve NAME --instance ID`` of a host."""

    name: str
    instance: str = "0"

    @property
    def label(self) -> str:
        return f"{self.name}.{self.instance}"


@dataclass
class Host:
    """A machine of the harness: its namespaces, its services, its address (once started)."""

    name: str
    index: int
    services: Sequence[Service]
    home: Path
    log_dir: Path
    env: dict[str, str]
    ip: str = ""
    process: subprocess.Popen[bytes] | None = None
    ops: dict[str, int] = field(default_factory=dict)

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def log(self) -> str:
        """What the host and its services printed so far, service by service."""
        parts = []
        for path in [self.log_path, *sorted(self.log_dir.glob(f"{self.name}.*.log"))]:
            if path.exists():
                parts.append(f"--- {path.name}\n{path.read_text(errors='replace')}")
        return "\n".join(parts)

    @property
    def gateway_url(self) -> str:
        """Its gateway's address from the root namespace (when it runs one)."""
        return f"http://{self.ip}:{GATEWAY_PORT}"

    def _script(self) -> str:
        """The host's first process: wait for its link, take its address, mount its home,
        start its services, wait for them."""
        lines = [
            "set -eu",
            "for _ in $(seq 1000); do ip link show eth0 >/dev/null 2>&1 && break; sleep 0.01; done",
            'ip addr add "$MN_IP/24" dev eth0',
            "ip link set lo up",
            "ip link set eth0 up",
            'mkdir -p "$SOONG_AGENT_HOME"',
            'mount -t tmpfs -o size=1g,mode=0755 "soong-$MN_HOST" "$SOONG_AGENT_HOME"',
            "echo mounted",
        ]
        py = shlex.quote(sys.executable)
        for k, svc in enumerate(self.services):
            port = _OPS_PORT_BASE + k
            self.ops[svc.label] = port
            argv = f"{py} -m agent_core.cli serve {svc.name} --instance {svc.instance}"
            log = shlex.quote(str(self.log_dir / f"{self.name}.{svc.label}.log"))
            lines.append(f"SOONG_OPS_PORT={port} {argv} >>{log} 2>&1 &")
        lines.append("wait")
        return "\n".join(lines)

    def start(self, fabric: Fabric) -> None:
        """Start the host's namespaces and services (returns at once; see :meth:`wait_ready`)."""
        self.ip = fabric.host_ip(self.index)
        env = {
            **self.env,
            "MN_IP": self.ip,
            "MN_HOST": self.name,
            "SOONG_AGENT_HOME": str(self.home),
            # Every address of the host's own namespace: its loopback and its end of the fabric.
            "SOONG_OPS_HOST": "0.0.0.0",
            "SOONG_GATEWAY_HOST": "0.0.0.0",
            "SOONG_GATEWAY_PORT": str(GATEWAY_PORT),
            "PYTHONUNBUFFERED": "1",
        }
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    "unshare",
                    "--mount",
                    "--net",
                    "--propagation",
                    "private",
                    "--",
                    "bash",
                    "-c",
                    self._script(),
                ],  # fmt: skip
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
                start_new_session=True,
            )
        fabric.attach(self.process.pid, self.index)

    def wait_ready(self, timeout_s: float = _READY_S) -> None:
        """Until every service of the host answers ``/readyz`` (the gateway on its own port)."""
        deadline = time.monotonic() + timeout_s
        waiting = dict(self.ops)
        with httpx.Client(timeout=2) as client:
            while waiting:
                if self.process is None or self.process.poll() is not None:
                    raise AssertionError(f"host {self.name} exited:\n{self.log()[-4000:]}")
                for label, port in list(waiting.items()):
                    url = f"http://{self.ip}:{port}/readyz"
                    if label.startswith("gateway"):
                        url = f"{self.gateway_url}/readyz"
                    with contextlib.suppress(httpx.HTTPError):
                        if client.get(url).status_code == 200:
                            del waiting[label]
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"host {self.name}: {sorted(waiting)} not ready:\n{self.log()[-4000:]}"
                    )
                time.sleep(0.1)

    def pids(self) -> list[int]:
        """Every live process of the host (its group). Zombies are not counted: they run no
        code, and the host's first process stays one until it is reaped (``poll`` below), so
        counting it made every stop wait out its whole deadline."""
        if self.process is None:
            return []
        self.process.poll()  # reap the first process if it has ended
        pgid = self.process.pid
        found = []
        for proc in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc.pid)
        return found

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL to the whole host at once, as a power cut."""
        self.signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(10)
        deadline = time.monotonic() + 10
        while (left := self.pids()) and time.monotonic() < deadline:
            for pid in left:  # the group outlived its first process (a stop that timed out)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM to each service), SIGKILL when it takes too long."""
        stop_hosts([self])

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """A command inside the host's namespaces (its files, its network)."""
        assert self.process is not None
        return run(
            "nsenter", "--target", str(self.process.pid), "--mount", "--net", "--", *argv,
            check=False,
        )  # fmt: skip


def stop_hosts(hosts: Sequence[Host], timeout_s: float = 20) -> None:
    """SIGTERM to every host at once, then wait for them together until none has a live
    process; SIGKILL what did not stop within ``timeout_s`` (one deadline for all: a host's
    graceful stop does not wait behind another's)."""
    running = [h for h in hosts if h.process is not None and h.process.poll() is None]
    for host in running:
        host.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(host.pids() for host in running) and time.monotonic() < deadline:
        time.sleep(0.05)
    for host in running:
        host.kill()  # what did not stop in time (nothing, when all stopped)


def free_port(host: str) -> int:
    """A port free a moment ago on ``host`` and on loopback (Valkey binds both)."""
    import socket

    while True:
        with socket.socket() as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
