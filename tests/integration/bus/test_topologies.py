"""The bus, run queue, gateway limits and memory queue suites on Sentinel, Cluster, and TLS.

The suites' own files run them on the standalone Valkey every test shares; here the same test
functions (imported, so they are collected again in this module) get a ``redis`` client (and
the ``bus`` made over it) of the
topology this module started, once per topology for the whole module: a Sentinel set (primary,
replica, three sentinels), a three-primary, three-replica Cluster, and each of one node, the
Sentinel set and the Cluster again on TLS only, with client certificates (a CA the tests make;
replication, the sentinels and the cluster bus on TLS too). On a Cluster every script
and transaction must keep to one slot (``CROSSSLOT`` otherwise), which the hash tags of
``agent_core.bus.names`` see to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from agent_core.bus import BusNames
from agent_core.config.schema import BusSettings
from agent_core.service.context import bus_client
from services.gateway.devkey import reachable_redis
from services.gateway.keys import ApiKeyStore
from tests.engines.valkey_topologies import Topology, start_topology
from tests.integration.bus.test_redelivery import test_reply_reaches_requester
from tests.integration.bus.test_rpc_cancel import (
    test_a_cancel_that_lands_with_the_reply_is_not_dropped,
)
from tests.integration.gateway.test_auth_limits import (
    test_expired_keys_are_401_and_listing_shows_last_use,
    test_repeated_failures_turn_into_429,
    test_revoked_and_unknown_keys_are_401,
    test_sse_slots_belong_to_a_live_gateway,
    test_sse_slots_cap_and_release,
    test_sse_slots_of_a_gateway_that_stopped_beating_lapse,
    test_token_bucket_answers_429_with_retry_after,
)
from tests.integration.memory_extraction.test_queue import (
    test_a_batch_failing_every_time_is_moved_aside_not_lost,
    test_a_batch_of_interactions_is_queued_in_order_in_one_call,
    test_an_account_is_due_only_after_the_debounce,
)
from tests.integration.run_worker.test_queue import (
    test_a_lane_held_long_is_deferred_to_its_lease_end_and_released_lanes_leave,
    test_a_lane_is_due_when_queued_and_each_due_lane_goes_to_one_sweeper,
    test_a_renewed_lease_keeps_its_lane_from_every_sweep,
    test_claim_prelude_numbers_attempts_and_sees_cancels,
    test_lanes_listed_by_an_older_version_are_adopted_once,
    test_only_the_lease_holder_takes_the_next_run,
    test_start_drain_takes_the_lease_and_the_first_work,
    test_taking_a_lane_moves_its_due_time_to_the_end_of_its_lease,
)

__all__ = [
    "test_a_cancel_that_lands_with_the_reply_is_not_dropped",
    "test_reply_reaches_requester",
    "test_a_batch_failing_every_time_is_moved_aside_not_lost",
    "test_a_batch_of_interactions_is_queued_in_order_in_one_call",
    "test_a_lane_held_long_is_deferred_to_its_lease_end_and_released_lanes_leave",
    "test_a_lane_is_due_when_queued_and_each_due_lane_goes_to_one_sweeper",
    "test_an_account_is_due_only_after_the_debounce",
    "test_claim_prelude_numbers_attempts_and_sees_cancels",
    "test_expired_keys_are_401_and_listing_shows_last_use",
    "test_lanes_listed_by_an_older_version_are_adopted_once",
    "test_a_renewed_lease_keeps_its_lane_from_every_sweep",
    "test_only_the_lease_holder_takes_the_next_run",
    "test_repeated_failures_turn_into_429",
    "test_revoked_and_unknown_keys_are_401",
    "test_sse_slots_belong_to_a_live_gateway",
    "test_sse_slots_cap_and_release",
    "test_sse_slots_of_a_gateway_that_stopped_beating_lapse",
    "test_start_drain_takes_the_lease_and_the_first_work",
    "test_taking_a_lane_moves_its_due_time_to_the_end_of_its_lease",
    "test_token_bucket_answers_429_with_retry_after",
]


@pytest.fixture(
    scope="module", params=["sentinel", "cluster", "tls", "tls_sentinel", "tls_cluster"]
)
def topology(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Topology]:
    """One topology for the module's tests (pytest groups the tests by it: one start each)."""
    kind = str(request.param)
    started = start_topology(kind, Path(tmp_path_factory.mktemp(kind)))
    yield started
    started.stop()


@pytest.fixture
def redis_url(topology: Topology) -> str:
    """The topology's URL (the bus tests hand it to helpers that take one)."""
    return topology.url


@pytest.fixture
async def redis(topology: Topology) -> AsyncIterator[Redis]:
    """The services' client of ``topology`` (from its ``[bus]`` settings), for one test."""
    client = bus_client(BusSettings.model_validate(topology.bus_settings()))
    yield client  # the conftest's ``bus`` fixture makes the tests' Bus over it
    await client.aclose()


async def test_the_key_commands_reach_the_configured_topology(
    topology: Topology, names: BusNames
) -> None:
    """``soong-agent keys`` and ``up``'s development key use the ``[bus]`` topology's client."""
    bus = BusSettings.model_validate(topology.bus_settings())
    assert bus.redis_url is not None
    redis = await reachable_redis(bus.redis_url, bus)
    try:
        store = ApiKeyStore(redis, names)
        key, _ = await store.create("acme")
        record = await store.resolve(key)
        assert record is not None and record.account_id == "acme"
    finally:
        await redis.aclose()
