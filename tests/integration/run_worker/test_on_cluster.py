"""A run end to end on a three-primary, three-replica Valkey Cluster: the storage-writer and two
run-workers as processes whose ``[bus]`` says ``topology = "cluster"``, the test's client too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engines.valkey_topologies import Topology, start_topology
from tests.integration.run_worker.harness import BusClient, text_answer

_CLUSTER_CONFIG = 'topology = "cluster"\n'  # CONFIG ends inside its [bus] table


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    started = start_topology("cluster", Path(tmp_path_factory.mktemp("cluster")))
    yield started
    started.stop()


@pytest.fixture
def redis_url(topology: Topology, tmp_path: Path) -> str:
    """The Cluster's URL; the home's config names the topology (the client reads it too)."""
    (tmp_path / "config.toml").write_text(f"[bus]\n{_CLUSTER_CONFIG}")
    return topology.url


async def test_a_run_ends_once_on_a_cluster(make_cluster: Any, client: BusClient) -> None:
    cluster = make_cluster(
        lambda _: text_answer("done on a cluster"), workers=1, extra_config=_CLUSTER_CONFIG
    )
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    submitted = await client.send(sid, "hello")
    events = await client.events(sid, submitted.run_id)
    run = await client.run(submitted.run_id)
    assert run["status"] == "completed", cluster.log_text()
    assert [e.type for _, e in events].count("run_finished") == 1
