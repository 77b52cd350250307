"""Which Pub/Sub the bus speaks: sharded on a Valkey Cluster, classic on one node.

The bus's channels are point to point: a run's control channel is read by the worker executing
the run, a reply channel by the one process that asked. A Cluster forwards every classic
``PUBLISH`` to every node, so each signal and each reply costs every node of the cluster and the
cost grows with it. Sharded Pub/Sub (``SPUBLISH``/``SSUBSCRIBE``, Redis and Valkey 7+) keeps a
channel on the shard of its slot: the publisher writes to that shard and only that shard
delivers. On one node (standalone, behind Sentinel, with or without TLS) classic Pub/Sub is as
cheap and works on every server version, so it stays there.

The choice is the client's type: a ``RedisCluster`` speaks sharded Pub/Sub, any other client
classic. Publishers name the command with :func:`publish_command`; subscribers ask
:func:`is_cluster` (``ClusterPubSub.ssubscribe`` routes each channel to its slot's node).
"""

from __future__ import annotations

from typing import Literal

from redis.asyncio import RedisCluster

__all__ = ["is_cluster", "publish_command"]


def is_cluster(redis: object) -> bool:
    """Whether ``redis`` is a Cluster client (its channels are sharded)."""
    return isinstance(redis, RedisCluster)


def publish_command(redis: object) -> Literal["PUBLISH", "SPUBLISH"]:
    """The command that publishes on a channel of the bus ``redis`` reaches: ``SPUBLISH`` on a
    Cluster (only the channel's shard delivers it), ``PUBLISH`` elsewhere."""
    return "SPUBLISH" if is_cluster(redis) else "PUBLISH"
