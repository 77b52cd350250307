"""Fixtures: a cluster (writer + workers as subprocesses) and a bus client per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_core.bus import BusNames
from tests.integration.run_worker.harness import CONFIG, BusClient, Cluster, fake_server


@pytest.fixture
def make_cluster(
    redis_url: str, names: BusNames, tmp_path: Path
) -> Iterator[Callable[..., Cluster]]:
    """Start a cluster whose fake model answers with ``default``; stopped after the test."""
    clusters: list[Cluster] = []

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
        (tmp_path / "config.toml").write_text(CONFIG.format(memory=enabled) + extra_config)
        cluster = Cluster(redis_url, names, tmp_path, fake_server(default), extra_env=env or {})
        cluster.start_writer()
        for i in range(workers):
            cluster.start_worker(i)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()
        cluster.fake.stop_thread()


@pytest.fixture
async def client(redis_url: str, names: BusNames, tmp_path: Path) -> AsyncIterator[BusClient]:
    """A bus client on the test's namespace."""
    bus = BusClient(redis_url, names, tmp_path)
    await bus.start()
    yield bus
    await bus.close()
