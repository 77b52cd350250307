"""The engines and the hosts of one multi-host run: :class:`Cluster` and :func:`cluster`.

A cluster brings up the fabric (:class:`~tests.multinode.fabric.Fabric`), the bus on it (one
Valkey, :class:`~tests.multinode.harness.HostValkey`, or a Sentinel set or a Cluster of
``tests/engines``' topologies), the ``config.toml`` and the API key every host shares; then the
hosts (:class:`~tests.multinode.harness.Host`) added to it, and the scripted model servers it
serves on the fabric. :meth:`Cluster.stop` (or the end of :func:`cluster`'s block) stops the
hosts, the bus and the fabric.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from redis.asyncio import Redis

from agent_core.bus import BusNames, make_redis
from agent_core.bus.topology import bus_client
from agent_core.config.schema import BusSettings
from services.gateway.keys import ApiKeyStore
from tests.engines.valkey_topologies import Topology, start_topology
from tests.fakes.openai_server import FakeOpenAIServer
from tests.multinode.fabric import Fabric
from tests.multinode.harness import Host, HostValkey, Service, free_port, stop_hosts

__all__ = ["Cluster", "cluster"]


@dataclass
class Cluster:
    """The engines and the hosts of one harness run."""

    base: Path
    fabric: Fabric
    # The bus: one Valkey (``valkey``), or a Sentinel set or a Cluster on the fabric (``topology``).
    valkey: HostValkey | None
    env: dict[str, str]
    hosts: dict[str, Host] = field(default_factory=dict)
    api_key: str = ""
    topology: Topology | None = None

    @property
    def home(self) -> Path:
        """The home path, the same string on every host (a private tmpfs on each)."""
        return self.base / "home"

    @classmethod
    def start(
        cls,
        base: Path,
        env: dict[str, str] | None = None,
        config: str = "",
        bus: str = "standalone",
        second: int = 0,
    ) -> Cluster:
        """The fabric, the bus on it, and an API key; no hosts yet (see :meth:`add_host`).
        ``config``: the ``config.toml`` every host's services read (``SOONG_CONFIG``); ``bus``:
        ``standalone`` (one Valkey), ``sentinel`` or ``cluster`` (``tests/engines``' topologies,
        listening on the fabric; their ``[bus]`` fields are added to ``config``); ``second``:
        numbers a cluster up beside another of this process (its own links and subnet)."""
        fabric = Fabric(second)
        fabric.up()
        valkey: HostValkey | None = None
        topology: Topology | None = None
        try:
            if bus == "standalone":
                valkey = HostValkey(base / "valkey", fabric.engine_ip, free_port(fabric.engine_ip))
                valkey.start()
                url = valkey.url
            else:
                topology = start_topology(bus, base / "bus", fabric.engine_ip)
                url = topology.url
                config = _with_bus_fields(config, topology.bus_settings())
        except BaseException:
            fabric.down()
            raise
        config_file = base / "config.toml"
        config_file.write_text(config)
        cluster = cls(
            base,
            fabric,
            valkey,
            {
                **os.environ,
                **(env or {}),
                "SOONG_REDIS_URL": url,
                "SOONG_CONFIG": str(config_file),
            },
            topology=topology,
        )
        cluster.api_key = asyncio.run(cluster._make_key())
        return cluster

    def bus_client(self) -> Redis:
        """A client of the bus for the test itself (close it)."""
        if self.topology is not None:
            return bus_client(BusSettings.model_validate(self.topology.bus_settings()))
        assert self.valkey is not None
        return make_redis(self.valkey.local_url)

    def bus_pids(self) -> list[int]:
        """The bus's server processes (sentinels included)."""
        servers = self.topology.servers if self.topology is not None else [self.valkey]
        return [s.process.pid for s in servers if s is not None and s.process is not None]

    async def _make_key(self) -> str:
        redis = self.bus_client()
        try:
            key, _ = await ApiKeyStore(redis, BusNames(self.namespace)).create("dev")
            return key
        finally:
            await redis.aclose()

    @property
    def namespace(self) -> str:
        return self.env.get("SOONG_BUS_NAMESPACE", "soong")

    def add_host(self, name: str, services: Sequence[Service], *, wait: bool = True) -> Host:
        """Start a host running ``services``."""
        assert name not in self.hosts, name
        host = Host(name, len(self.hosts), services, self.home, self.base / "logs", dict(self.env))
        self.hosts[name] = host
        host.start(self.fabric)
        if wait:
            host.wait_ready()
        return host

    @contextlib.contextmanager
    def serving(self, model: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
        """``model`` (a scripted OpenAI-style server) listening on the fabric for the block,
        and the hosts added meanwhile pointed at it as their default model."""
        model.host = self.fabric.engine_ip
        model.start_in_thread()
        self.env.update(
            {
                "SOONG_MODEL_PROVIDER": "openai",
                "SOONG_MODEL_NAME": "fake-model",
                "SOONG_MODEL_BASE_URL": model.sdk_base_url,
                "OPENAI_API_KEY": "sk-test-not-a-real-key-000000",
            }
        )
        try:
            yield model
        finally:
            model.stop_thread()

    def start_hosts(self, hosts: Sequence[tuple[str, Sequence[Service]]]) -> list[Host]:
        """Start ``hosts`` (name, services) together; return them once each is ready."""
        started = [self.add_host(name, services, wait=False) for name, services in hosts]
        for host in started:
            host.wait_ready()
        return started

    def cut(self, host: Host) -> None:
        self.fabric.cut(host.ip)

    def heal(self, host: Host) -> None:
        self.fabric.heal(host.ip)

    def logs(self) -> str:
        return "\n".join(h.log()[-3000:] for h in self.hosts.values())

    def stop(self) -> None:
        stop_hosts(list(self.hosts.values()))
        if self.valkey is not None:
            self.valkey.stop()
        if self.topology is not None:
            self.topology.stop()
        self.fabric.down()


def _with_bus_fields(config: str, fields: dict[str, object]) -> str:
    """``config`` with the topology's ``[bus]`` fields (the URL comes from the environment)."""
    lines = "".join(
        f"{key} = {json.dumps(value)}\n" for key, value in fields.items() if key != "redis_url"
    )
    if "[bus]\n" in config:
        return config.replace("[bus]\n", f"[bus]\n{lines}", 1)
    return f"{config}\n[bus]\n{lines}"


@contextlib.contextmanager
def cluster(
    base: Path,
    env: dict[str, str] | None = None,
    config: str = "",
    bus: str = "standalone",
    second: int = 0,
) -> Iterator[Cluster]:
    """A :class:`Cluster` for the ``with`` block (``second``: see :meth:`Cluster.start`)."""
    started = Cluster.start(base, env, config, bus, second)
    try:
        yield started
    finally:
        started.stop()
