"""The bus's primary lost under load, in the multi-host harness: serving again, nothing lost.

For each topology asked (``--bus sentinel,cluster``) the harness starts that bus on its fabric
(a Sentinel set: a primary, a replica, three sentinels; or a Cluster: three primaries, three
replicas), a *core* host (storage-writer, task-WAL, memory extraction, a gateway) and two worker
hosts (``w1`` with a gateway too). ``--sessions`` clients (50) each post ``--turns`` messages
(10) one after the other, through the two gateways in turn, each waiting for its run's end. Once
``--kill-after`` runs were accepted, the bus's primary (Sentinel) or one shard's primary
(Cluster) is killed with SIGKILL. A post that fails meanwhile (503, a reset) is tried again with
the same ``Idempotency-Key``; a run counts as *accepted* once its post was answered 202.

Printed last, one JSON line, per topology ``<bus>_``:

* ``serving_again_s``: from the kill to the first run accepted after it that completed;
* ``accepted``, ``completed``: runs; ``lost``: accepted runs not completed within
  ``--drain-s`` after the load (each still ``queued`` or ``running``, or failed);
* ``finished_twice``: runs whose stream shows more than one ``run_finished``;
  ``duplicate_nodes``: messages or answers present twice on a session's tree;
* ``refused_posts``: posts answered with an error or not at all during the failover.

Goals (the bus issue): serving again within 10 s; every accepted run ends exactly once (``lost``,
``finished_twice`` and ``duplicate_nodes`` 0).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared"), str(ROOT / "bench")]

import httpx  # noqa: E402

from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.fakes.script import Delay, Finish, ScriptedTurn, Text, Usage  # noqa: E402
from tests.multinode.harness import Cluster, Service, cluster  # noqa: E402

CORE = (
    Service("storage_writer"),
    Service("task_wal"),
    Service("memory_extraction"),
    Service("gateway", "core"),
)
TERMINAL = ("completed", "failed", "cancelled", "aborted")
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


class Load:
    """The clients, what they were answered, and the kill in the middle."""

    def __init__(self, cl: Cluster, args: argparse.Namespace) -> None:
        self.cl = cl
        self.args = args
        headers = {"Authorization": f"Bearer {cl.api_key}"}
        self.apis = [
            httpx.AsyncClient(base_url=cl.hosts[h].gateway_url, headers=headers, timeout=10)
            for h in ("core", "w1")
        ]
        self.accepted: list[tuple[str, str, float]] = []  # (session, run, when accepted)
        self.ended: dict[str, tuple[str, float]] = {}  # run -> (status, when seen ended)
        self.refused = 0
        self.killed_at: float | None = None
        self.enough = asyncio.Event()

    async def close(self) -> None:
        for api in self.apis:
            await api.aclose()

    async def _post(self, i: int, sid: str, text: str) -> str:
        # A retry repeats the key: it names the run a first, unanswered, attempt may have made.
        headers = {"Idempotency-Key": text.replace(" ", "-")}
        while True:
            api = self.apis[i % 2]
            try:
                reply = await api.post(
                    f"/v1/sessions/{sid}/messages", json={"text": text}, headers=headers
                )
                if reply.status_code == 202:
                    run_id = str(reply.json()["run_id"])
                    self.accepted.append((sid, run_id, time.monotonic()))
                    if len(self.accepted) >= self.args.kill_after:
                        self.enough.set()
                    return run_id
                if 400 <= reply.status_code < 500 and reply.status_code not in (408, 429):
                    raise RuntimeError(f"post refused: {reply.status_code} {reply.text}")
            except httpx.HTTPError:
                pass
            self.refused += 1
            i += 1  # the other gateway next time
            await asyncio.sleep(0.5)

    async def _wait_end(self, i: int, sid: str, run_id: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                reply = await self.apis[i % 2].get(f"/v1/sessions/{sid}/runs/{run_id}")
                if reply.status_code == 200 and reply.json()["status"] in TERMINAL:
                    self.ended[run_id] = (str(reply.json()["status"]), time.monotonic())
                    return
            except httpx.HTTPError:
                pass
            i += 1
            await asyncio.sleep(0.3)

    async def client(self, index: int) -> str:
        reply = await self.apis[index % 2].post("/v1/sessions", json={})
        sid = str(reply.json()["session_id"])
        for turn in range(self.args.turns):
            run_id = await self._post(index + turn, sid, f"s{index} turn {turn}")
            await self._wait_end(index + turn, sid, run_id, time.monotonic() + self.args.drain_s)
            if run_id not in self.ended:
                break  # this session's next turn would only queue behind a lost one
        return sid


async def _kill_primary(cl: Cluster, load: Load) -> None:
    await load.enough.wait()
    topology = cl.topology
    assert topology is not None
    if topology.kind == "sentinel":
        victim = topology.primary()  # type: ignore[attr-defined]
    else:
        victim = next(
            s for s in topology.servers if s.client().info("replication")["role"] == "master"
        )
    victim.kill()
    load.killed_at = time.monotonic()
    print(f"# killed the primary on port {victim.port}", file=sys.stderr)


async def _audit(cl: Cluster, load: Load, sids: list[str]) -> dict[str, float]:
    """Finished-twice runs and duplicated nodes, from the stored tree and the streams."""
    api = load.apis[0]
    finished_twice = duplicates = 0
    for sid in sids:
        reply = await api.get(f"/v1/sessions/{sid}/tree")
        assert reply.status_code == 200, reply.text
        tree = reply.json()
        texts = collections.Counter(
            (n["role"], n["preview"]) for n in tree["nodes"] if n["node_type"] == "message"
        )
        duplicates += sum(c - 1 for c in texts.values() if c > 1)
    for sid, run_id, _ in load.accepted:
        async with api.stream("GET", f"/v1/sessions/{sid}/runs/{run_id}/events") as reply:
            kinds = [line[7:] async for line in reply.aiter_lines() if line.startswith("event: ")]
        finished_twice += kinds.count("run_finished") > 1
    return {"finished_twice": finished_twice, "duplicate_nodes": duplicates}


async def measure(cl: Cluster, args: argparse.Namespace) -> dict[str, float]:
    load = Load(cl, args)
    killer = asyncio.create_task(_kill_primary(cl, load))
    try:
        sids = await asyncio.gather(*(load.client(i) for i in range(args.sessions)))
        await killer
        assert load.killed_at is not None
        after = sorted(
            load.ended[run][1]
            for _, run, at in load.accepted
            if at > load.killed_at and load.ended.get(run, ("", 0.0))[0] == "completed"
        )
        audit = await _audit(cl, load, list(sids))
    finally:
        killer.cancel()
        await load.close()
    completed = sum(1 for status, _ in load.ended.values() if status == "completed")
    return {
        "serving_again_s": (after[0] - load.killed_at) if after else float("inf"),
        "accepted": len(load.accepted),
        "completed": completed,
        "lost": len(load.accepted) - completed,
        "refused_posts": load.refused,
        **audit,
    }


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
