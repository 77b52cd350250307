"""The bus's primary lost under load, in the multi-host harness: serving again, nothing lost.

For each topology asked (``--bus sentinel,cluster``) the harness starts that bus on its fabric
(a Sentinel set: a primary, a replica, three sentinels; or a Cluster: three primaries, three
replicas), a *core* host (storage-writer, task-WAL, memory extraction, a gateway) and two worker
hosts (``w1`` with a gateway too). ``--sessions`` clients (50) each post ``--turns`` messages
(10) one after the other, through the two gateways in turn, each waiting for its run's end. Once
``--kill-after`` runs were accepted, the bus's primary (Sentinel) or one shard's primary
(Cluster) is killed with SIGKILL. A post that fails meanwhile (503, a reset) is tried again with
the same ``Idempotency-Key``; a run counts as *accepted* once its post was answered 202 (the
load and its audit: ``tests/multinode/load.py``).

Printed last, one JSON line, per topology ``<bus>_``:

* ``serving_again_s``: from the kill to the first run accepted after it that completed;
* ``accepted``, ``completed``: runs; ``lost``: accepted runs not completed within
  ``--drain-s`` after the load (each still ``queued`` or ``running``, or failed);
* ``finished_twice``: runs whose stream shows more than one ``run_finished``;
  ``duplicate_nodes``: messages or answers present twice on a session's tree; ``missing_nodes``:
  accepted runs whose message is not on the tree;
* ``refused_posts``: posts answered with an error or not at all during the failover.

Goals (the bus issue): serving again within 10 s; every accepted run ends exactly once (``lost``,
``finished_twice`` and ``duplicate_nodes`` 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared"), str(ROOT / "bench")]

from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.fakes.script import Delay, Finish, ScriptedTurn, Text, Usage  # noqa: E402
from tests.multinode.cluster import Cluster, cluster  # noqa: E402
from tests.multinode.harness import Service  # noqa: E402
from tests.multinode.load import Load, LoadShape  # noqa: E402

CORE = (
    Service("storage_writer"),
    Service("task_wal"),
    Service("memory_extraction"),
    Service("gateway", "core"),
)
# One API key drives every client: the per-key limits must not be what is measured.
CONFIG = """
[gateway]
rate_limit_per_s = 1000000.0
rate_limit_burst = 1000000
max_sse_streams_per_key = 1000
"""


def _model() -> FakeOpenAIServer:
    def answer(request: Any) -> ScriptedTurn:
        text = str(request["messages"][-1].get("content", ""))
        steps: list[Any] = [Delay(seconds=0.2), Text(text=f"answer to {text}")]
        return ScriptedTurn(steps=[*steps, Usage(input_tokens=5, output_tokens=5), Finish()])

    return FakeOpenAIServer(default=answer)


async def _kill_primary(cl: Cluster) -> None:
    topology = cl.topology
    assert topology is not None
    if topology.kind == "sentinel":
        victim = topology.primary()  # type: ignore[attr-defined]
    else:
        victim = next(
            s for s in topology.servers if s.client().info("replication")["role"] == "master"
        )
    victim.kill()
    print(f"# killed the primary on port {victim.port}", file=sys.stderr)


async def measure(cl: Cluster, args: argparse.Namespace) -> dict[str, float]:
    shape = LoadShape(args.sessions, args.turns, args.kill_after, args.drain_s)
    load = Load(cl, ("core", "w1"), shape)
    try:
        return await load.run(partial(_kill_primary, cl))
    finally:
        await load.close()


def run_on(bus: str, args: argparse.Namespace) -> dict[str, float]:
    hosts = [
        ("core", CORE),
        ("w1", [Service("run_worker", "w1"), Service("gateway", "w1")]),
        ("w2", [Service("run_worker", "w2")]),
    ]
    with (
        tempfile.TemporaryDirectory(prefix="soong-failover-") as tmp,
        cluster(Path(tmp), config=CONFIG, bus=bus) as cl,
        cl.serving(_model()),
    ):
        cl.start_hosts(hosts)
        figures = asyncio.run(measure(cl, args))
        if figures["lost"] or figures["finished_twice"]:
            print(cl.logs()[-6000:], file=sys.stderr)
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bus", default="sentinel,cluster")
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--kill-after", type=int, default=100, help="accepted runs before")
    parser.add_argument("--drain-s", type=float, default=120.0, help="how long a run may take")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/bus_failover.py needs root (namespaces, mounts, links)")
    out: dict[str, float] = {}
    for bus in args.bus.split(","):
        figures = run_on(bus, args)
        print(f"# {bus}: {json.dumps(figures)}", file=sys.stderr)
        out.update({f"{bus}_{k}": v for k, v in figures.items()})
    print(json.dumps({"bench": "bus_failover", **{k: round(v, 3) for k, v in out.items()}}))


if __name__ == "__main__":
    main()
