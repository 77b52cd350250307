"""A run end to end on a three-primary, three-replica Valkey Cluster: the storage-writer and two
run-workers as processes whose ``[bus]`` says ``topology = "cluster"``, the test's client too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_core.runqueue import cancel_run
from agent_core.types.enums import MultitaskStrategy
from tests.engines.valkey_topologies import Topology, running_cluster
from tests.integration.run_worker.harness import BusClient, last_user_text, text_answer

_CLUSTER_CONFIG = 'topology = "cluster"\n'  # CONFIG ends inside its [bus] table


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as started:
        yield started


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


def _slow_or_fresh(request: Any) -> Any:
    if "slow" in last_user_text(request):
        return text_answer("one two three four five six seven eight", delay_s=0.4, pieces=8)
    return text_answer("fresh")


async def test_an_interrupt_and_a_cancel_stop_runs_on_a_cluster(
    make_cluster: Any, client: BusClient
) -> None:
    """The worker hears both on the run's sharded control channel; the interrupt's flag, set in
    the same write on the same shard, is there when it does, so the displaced run ends
    ``aborted``, not ``cancelled``."""
    cluster = make_cluster(_slow_or_fresh, workers=1, extra_config=_CLUSTER_CONFIG)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    active = (await client.send(sid, "slow one")).run_id
    assert await client.wait_event(sid, active, lambda e: e["type"] == "text_delta", 20)
    newer = (await client.send(sid, "now", strategy=MultitaskStrategy.INTERRUPT)).run_id
    runs = await client.wait_terminal([active, newer])
    assert (runs[active]["status"], runs[active]["end_reason"]) == ("aborted", "aborted_streaming")
    assert runs[newer]["status"] == "completed", cluster.log_text()[-2000:]
    plain = (await client.send(sid, "slow two")).run_id
    assert await client.wait_event(sid, plain, lambda e: e["type"] == "text_delta", 20)
    how = await cancel_run(client.storage, client.queue, session_id=sid, run_id=plain)
    assert how == "signalled"
    ended = (await client.wait_terminal([plain]))[plain]
    assert (ended["status"], ended["end_reason"]) == ("cancelled", "aborted_streaming")
