"""The process's bus client from its ``[bus]`` settings (topology, sentinels, TLS files)."""

from __future__ import annotations

from redis.asyncio import Redis

from agent_core.bus.connection import BusTls, connect_bus
from agent_core.config.schema import BusSettings

__all__ = ["bus_client"]


def bus_client(bus: BusSettings) -> Redis:
    """The redis-py client of the bus ``[bus]`` describes (its topology and TLS files)."""
    assert bus.redis_url is not None
    tls = BusTls(
        ca_file=str(bus.tls.ca_file) if bus.tls.ca_file else None,
        cert_file=str(bus.tls.cert_file) if bus.tls.cert_file else None,
        key_file=str(bus.tls.key_file) if bus.tls.key_file else None,
    )
    sentinels = [
        (host.strip("[]"), int(port))
        for host, _, port in (s.rpartition(":") for s in bus.sentinels)
    ]
    return connect_bus(
        bus.redis_url,
        topology=bus.topology,
        sentinels=sentinels,
        sentinel_master=bus.sentinel_master,
        tls=tls,
    )
