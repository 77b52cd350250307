"""Fixtures: a cluster (writer + workers as subprocesses) and a bus client.

A cluster costs seconds of CPU to start (three processes). A module that sets
``SHARED_CLUSTER = True`` shares one among its tests: each test still calls ``make_cluster`` with
its own fake model, and gets the module's running cluster when it asks for the same settings
(workers, memory, config, environment), with the fake now answering with this test's model and
its recorded requests cleared. The tests stay independent because each works in sessions of its
own (a new session id each), and a cluster is handed on only whole: after a test, a cluster one of
whose processes has ended is stopped, not shared. Settings that differ from the running cluster's
stop it and start the new one (one cluster per module runs at a time: they share the module's bus
names). A test that kills, stops or signals a process, or that reads something shared across the
namespace, is marked ``own_cluster`` and gets a cluster and bus names of its own, as every test
does in the other modules.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_core.bus import BusNames
from tests.integration.run_worker.harness import CONFIG, BusClient, Cluster, fake_server


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "own_cluster: in a SHARED_CLUSTER module, a cluster for this test alone"
    )


def _shares(request: pytest.FixtureRequest) -> bool:
    """Whether this test uses its module's shared cluster."""
    module = getattr(request, "module", None)
    return bool(getattr(module, "SHARED_CLUSTER", False)) and (
        request.node.get_closest_marker("own_cluster") is None
    )


def _start(
    redis_url: str,
    names: BusNames,
    home: Path,
    default: Callable[[Any], Any],
    *,
    workers: int,
    config: str,
    env: dict[str, str],
) -> Cluster:
    (home / "config.toml").write_text(config)
    cluster = Cluster(redis_url, names, home, fake_server(default), extra_env=env)
    cluster.start_writer()
    for i in range(workers):
        cluster.start_worker(i)
    return cluster


def _stop(cluster: Cluster) -> None:
    cluster.stop()
    cluster.fake.stop_thread()


@dataclass
class _Shared:
    """The module's bus names and home, and its running cluster with the settings it has."""

    names: BusNames
    home: Path
    key: tuple[Any, ...] | None = None
    cluster: Cluster | None = None

    def drop(self) -> None:
        if self.cluster is not None:
            _stop(self.cluster)
        self.cluster, self.key = None, None


@pytest.fixture(scope="module")
def _shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Shared]:
    shared = _Shared(BusNames(f"t{secrets.token_hex(5)}"), tmp_path_factory.mktemp("shared"))
    yield shared
    shared.drop()


@pytest.fixture
def make_cluster(
    request: pytest.FixtureRequest,
    redis_url: str,
    names: BusNames,
    tmp_path: Path,
    _shared: _Shared,
) -> Iterator[Callable[..., Cluster]]:
    """Start a cluster whose fake model answers with ``default`` (or, in a ``SHARED_CLUSTER``
    module, hand on the module's one with the same settings); stopped after the test (or, shared,
    when the module ends)."""
    shares = _shares(request)
    own: list[Cluster] = []

    def make(
        default: Callable[[Any], Any],
        *,
        workers: int = 2,
        memory: bool = False,
        memory_config: str = "",
        extra_config: str = "",
        env: dict[str, str] | None = None,
    ) -> Cluster:
        # ``memory_config``: more lines of the [memory] table (after its ``enabled``).
        enabled = f"{str(memory).lower()}\n{memory_config}"
        config = CONFIG.format(memory=enabled) + extra_config
        if not shares:
            cluster = _start(
                redis_url, names, tmp_path, default, workers=workers, config=config, env=env or {}
            )
            own.append(cluster)
            return cluster
        key = (workers, config, tuple(sorted((env or {}).items())))
        if _shared.key != key or _shared.cluster is None:
            _shared.drop()
            _shared.cluster = _start(
                redis_url,
                _shared.names,
                _shared.home,
                default,
                workers=workers,
                config=config,
                env=env or {},
            )
            _shared.key = key
        cluster = _shared.cluster
        cluster.fake.default = default
        cluster.fake.requests.clear()
        return cluster

    yield make
    for cluster in own:
        _stop(cluster)
    if shares and _shared.cluster is not None:
        procs = [*_shared.cluster.workers.values(), _shared.cluster.writer]
        if any(p is None or p.poll() is not None for p in procs):
            _shared.drop()  # a process ended: not handed on


@pytest.fixture
async def client(
    request: pytest.FixtureRequest,
    redis_url: str,
    names: BusNames,
    tmp_path: Path,
    _shared: _Shared,
) -> AsyncIterator[BusClient]:
    """A bus client on the test's namespace (in a ``SHARED_CLUSTER`` module, its cluster's)."""
    if _shares(request):
        names, tmp_path = _shared.names, _shared.home
    bus = BusClient(redis_url, names, tmp_path)
    await bus.start()
    yield bus
    await bus.close()
