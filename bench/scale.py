"""Scale benchmark: the stack on 1 to 4 worker hosts of the multi-host harness, on this machine.

Hosts are those of ``tests/multinode/harness.py`` (a mount and network namespace each, a private
home, a veth link to the engines); root only. A *core* host runs the storage-writer, the task-WAL,
memory extraction and a gateway; worker host ``w<i>`` runs one run-worker (``w1`` a second
gateway too). The model is a scripted OpenAI-style server on the fabric whose every answer waits
``--model-wait-s`` (1 s) before a short text: turns are I/O-bound, so what is measured is
coordination, not this machine's two cores. Clients (``--per-host`` sessions per worker host,
each posting turns back to back on one keep-alive connection and reading each run's stream to
``run_finished``) talk to the core's gateway.

Printed last, one JSON line:

* ``turns_per_s_{1..4}`` and ``scale_efficiency_{2,3,4}`` = turns/s with n worker hosts ÷
  (n × turns/s with one);
* ``cpu_ms_per_turn_{1..4}``: CPU of every process of every host (``utime + stime``) per turn;
  ``valkey_cpu_ms_per_turn_{1..4}`` the bus's own; ``machine_cpu_share_{1..4}`` the share of the
  machine's cores the whole phase used (hosts, bus, model and clients), which must stay below
  one half for the figures to mean coordination;
* ``valkey_cmds_per_turn_{1,4}`` (every command the bus executed, from ``INFO commandstats``,
  scripts' own calls included) and ``valkey_cmds_per_turn_{1,4}_idle``: the same with 1,000 idle
  lanes that have work queued and are leased by a parked worker (see :func:`park_lanes`);
* ``cpu_ms_per_turn_<service>_{1..4}``: the same split by service (every host's processes of
  that service summed);
* ``*_net`` figures: the same per turn once what the stack spends per second doing nothing
  (polls, heartbeats, sweeps: ``background_*_per_s``, measured right after each phase) is taken
  out, so that the per-turn work itself is compared across host counts (the background is spread
  over more turns as throughput grows, which alone makes the gross figures fall);
* ``cross_host_added_p50_ms``: a quick turn's p50 latency with the gateway on another host than
  the worker (core's gateway, ``w1``'s worker) minus the same through ``w1``'s own gateway,
  ``--latency-turns`` of each, alternated.

``--interleave R`` with two topologies (``--bus standalone,cluster``) measures instead only the
4-host load, with both stacks up at once (each on its own fabric) and their rounds alternated,
R of each, the order flipped every round: this machine's speed drifts by a quarter between runs
minutes apart, which one topology measured after the other reads as a difference between them.
Keys: ``interleaved_<bus>_cpu_ms_per_turn_4`` (median of the rounds), ``..._rounds`` spread
(max ÷ min − 1), and ``interleaved_<second>_cpu_ms_per_turn_4_ratio`` (median of the per-round
ratios, each round's second ÷ the first's measured beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared"), str(ROOT / "bench")]

from helpers.cluster_meter import Meter  # noqa: E402
from helpers.parked_lanes import park_lanes, unpark_lanes  # noqa: E402
from helpers.sse_client import RawClient  # noqa: E402

from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.fakes.script import Delay, Finish, ScriptedTurn, Text, Usage  # noqa: E402
from tests.multinode.cluster import Cluster, cluster  # noqa: E402
from tests.multinode.harness import Host, Service  # noqa: E402

CONFIG = """
[gateway]
rate_limit_per_s = 1000000.0
rate_limit_burst = 1000000
max_sse_streams_per_key = 1000
"""
CORE = (
    Service("storage_writer"),
    Service("task_wal"),
    Service("memory_extraction"),
    Service("gateway", "core"),
)
IDLE_LANES = 1000


def _model(wait_s: float) -> FakeOpenAIServer:
    def answer(request: Any) -> ScriptedTurn:
        quick = str(request["messages"][-1].get("content", "")).startswith("quick")
        steps: list[Any] = [] if quick else [Delay(seconds=wait_s)]
        steps += [Text(text="an answer of a few words, "), Text(text="in two pieces")]
        return ScriptedTurn(steps=[*steps, Usage(input_tokens=20, output_tokens=8), Finish()])

    return FakeOpenAIServer(default=answer)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def _session(client: RawClient) -> str:
    status, body = await client.json("POST", "/v1/sessions", {})
    assert status == 201, body
    return str(body["session_id"])


async def _turn(client: RawClient, sid: str, text: str) -> float:
    started = time.perf_counter()
    finished = None
    async for frame in client.stream(
        f"/v1/sessions/{sid}/messages", {"text": text, "stream": True}
    ):
        if frame.event == "run_finished":
            finished = json.loads(frame.data)
    if finished is None or finished["status"] != "completed":
        raise RuntimeError(f"run ended {finished}")
    return time.perf_counter() - started


async def background(meter: Meter, seconds: float) -> dict[str, float]:
    """What the stack spends per second doing no work: polls, heartbeats, sweeps."""
    before = await meter.read()
    await asyncio.sleep(seconds)
    after = await meter.read()
    return {
        "cpu_ms_per_s": (after["hosts"] - before["hosts"]) * 1000 / seconds,
        "valkey_cmds_per_s": (after["cmds"] - before["cmds"]) / seconds,
    }


async def load(cl: Cluster, meter: Meter, clients: int, turns: int) -> dict[str, float]:
    """``clients`` sessions, ``turns`` turns each, all at once through the core's gateway."""
    gateway = cl.hosts["core"].gateway_url
    conns = [RawClient(gateway, cl.api_key) for _ in range(clients)]
    sids = [await _session(c) for c in conns]
    await asyncio.gather(*(_turn(c, s, "warm-up") for c, s in zip(conns, sids, strict=True)))

    async def client(conn: RawClient, sid: str) -> None:
        for i in range(turns):
            await _turn(conn, sid, f"turn {i}")

    before = await meter.read()
    started = time.perf_counter()
    await asyncio.gather(*(client(c, s) for c, s in zip(conns, sids, strict=True)))
    elapsed = time.perf_counter() - started
    after = await meter.read()
    for conn in conns:
        await conn.close()
    done = clients * turns
    cores = os.cpu_count() or 1
    idle = await background(meter, 5.0)
    return {
        # Net of what the stack spends meanwhile doing nothing (``background``): the work that
        # turns themselves cost, which is what coordination across hosts could make grow.
        "cpu_ms_per_turn_net": (
            (after["hosts"] - before["hosts"]) * 1000 - idle["cpu_ms_per_s"] * elapsed
        )
        / done,
        "valkey_cmds_per_turn_net": (
            after["cmds"] - before["cmds"] - idle["valkey_cmds_per_s"] * elapsed
        )
        / done,
        **{
            f"cpu_ms_per_turn_{key[5:]}": (after[key] - before.get(key, 0.0)) * 1000 / done
            for key in after
            if key.startswith("role:") and key != "role:other"
        },
        "background_cpu_ms_per_s": idle["cpu_ms_per_s"],
        "background_valkey_cmds_per_s": idle["valkey_cmds_per_s"],
        "turns_per_s": done / elapsed,
        "cpu_ms_per_turn": (after["hosts"] - before["hosts"]) * 1000 / done,
        "valkey_cpu_ms_per_turn": (after["valkey"] - before["valkey"]) * 1000 / done,
        "valkey_cmds_per_turn": (after["cmds"] - before["cmds"]) / done,
        "machine_cpu_share": (after["all_cpu"] - before["all_cpu"]) / (elapsed * cores),
    }


async def cross_host_latency(cl: Cluster, turns: int) -> dict[str, float]:
    """Quick turns through ``w1``'s gateway (same host as the only worker) and the core's."""
    same = RawClient(cl.hosts["w1"].gateway_url, cl.api_key)
    cross = RawClient(cl.hosts["core"].gateway_url, cl.api_key)
    sids = {same: await _session(same), cross: await _session(cross)}
    for conn, sid in sids.items():
        await _turn(conn, sid, "quick warm-up")
    seen: dict[RawClient, list[float]] = {same: [], cross: []}
    for i in range(turns):
        for conn in (same, cross) if i % 2 else (cross, same):
            seen[conn].append(await _turn(conn, sids[conn], f"quick {i}"))
    for conn in sids:
        await conn.close()
    same_p50 = statistics.median(seen[same]) * 1000
    cross_p50 = statistics.median(seen[cross]) * 1000
    return {
        "same_host_turn_p50_ms": same_p50,
        "cross_host_turn_p50_ms": cross_p50,
        "cross_host_added_p50_ms": cross_p50 - same_p50,
    }


def _worker_host(cl: Cluster, i: int, *, wait: bool = True) -> Host:
    services = [Service("run_worker", f"w{i}")]
    if i == 1:
        services.append(Service("gateway", "w1"))
    return cl.add_host(f"w{i}", services, wait=wait)


async def measure(cl: Cluster, args: argparse.Namespace) -> dict[str, float]:
    meter = Meter(cl)
    out: dict[str, float] = {}
    for n in range(1, 5):
        if n > 1:  # (the first is started with the core: a gateway is ready once a worker is)
            _worker_host(cl, n)
        figures = await load(cl, meter, args.per_host * n, args.turns)
        for key, value in figures.items():
            out[f"{key}_{n}"] = value
        print(f"# {n} worker host(s): {json.dumps(figures)}", file=sys.stderr)
        if n == 1:
            out.update(await cross_host_latency(cl, args.latency_turns))
        if n in (1, 4):
            lanes = await park_lanes(cl, IDLE_LANES)
            idle = await load(cl, meter, args.per_host * n, args.turns)
            await unpark_lanes(cl, lanes)
            out[f"valkey_cmds_per_turn_{n}_idle"] = idle["valkey_cmds_per_turn"]
            out[f"valkey_cmds_per_turn_net_{n}_idle"] = idle["valkey_cmds_per_turn_net"]
            out[f"background_valkey_cmds_per_s_{n}_idle"] = idle["background_valkey_cmds_per_s"]
            out[f"turns_per_s_{n}_idle"] = idle["turns_per_s"]
            print(f"# {n} host(s), {IDLE_LANES} idle lanes: {json.dumps(idle)}", file=sys.stderr)
    await meter.redis.aclose()
    for n in (2, 3, 4):
        out[f"scale_efficiency_{n}"] = out[f"turns_per_s_{n}"] / (n * out["turns_per_s_1"])
    for key in ("valkey_cmds_per_turn", "valkey_cmds_per_turn_net"):
        for suffix in ("", "_idle"):
            out[f"{key}_ratio_4_to_1{suffix}"] = out[f"{key}_4{suffix}"] / out[f"{key}_1{suffix}"]
    for key in ("cpu_ms_per_turn", "cpu_ms_per_turn_net"):
        out[f"{key}_ratio_4_to_1"] = out[f"{key}_4"] / out[f"{key}_1"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-host", type=int, default=4, help="client sessions per worker host")
    parser.add_argument("--turns", type=int, default=20, help="turns per session per phase")
    parser.add_argument("--model-wait-s", type=float, default=1.0)
    parser.add_argument("--latency-turns", type=int, default=150)
    parser.add_argument("--interleave", type=int, default=0, metavar="R")
    parser.add_argument(
        "--bus",
        default="standalone",
        help="comma-separated topologies measured one after the other: standalone, sentinel, "
        "cluster; the keys of each after the first get its name as a prefix, with "
        "<name>_<key>_ratio against the first's",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/scale.py needs root (namespaces, mounts, links)")
    out: dict[str, float] = {}
    topologies = args.bus.split(",")
    if args.interleave:
        if len(topologies) != 2:
            sys.exit("--interleave compares two topologies: --bus <first>,<second>")
        out = run_interleaved(topologies, args)
        print(json.dumps({"bench": "scale", **{k: round(v, 4) for k, v in out.items()}}))
        return
    for topology in topologies:
        figures = run_on(topology, args)
        if topology == topologies[0]:
            out.update(figures)
            continue
        out.update({f"{topology}_{k}": v for k, v in figures.items()})
        for key in ("cpu_ms_per_turn_4", "cpu_ms_per_turn_1", "valkey_cmds_per_turn_4"):
            out[f"{topology}_{key}_ratio"] = figures[key] / out[key]
    print(json.dumps({"bench": "scale", **{k: round(v, 4) for k, v in out.items()}}))


def run_interleaved(topologies: list[str], args: argparse.Namespace) -> dict[str, float]:
    """Both topologies' stacks up at once (core and four worker hosts each), their 4-host loads
    alternated (see the module)."""
    with contextlib.ExitStack() as held:
        stacks: dict[str, Cluster] = {}
        for second, bus in enumerate(topologies):
            stacks[bus] = _stack(held, bus, args, second)
            for n in (2, 3, 4):
                _worker_host(stacks[bus], n)
        return asyncio.run(interleave(stacks, args))


async def interleave(stacks: dict[str, Cluster], args: argparse.Namespace) -> dict[str, float]:
    meters = {bus: Meter(cl) for bus, cl in stacks.items()}
    first, second = stacks
    seen: dict[str, list[float]] = {bus: [] for bus in stacks}
    ratios: list[float] = []
    for bus, cl in stacks.items():  # a warm-up round each, not counted
        await load(cl, meters[bus], args.per_host * 4, 2)
    for r in range(args.interleave):
        order = [first, second] if r % 2 == 0 else [second, first]
        for bus in order:
            figures = await load(stacks[bus], meters[bus], args.per_host * 4, args.turns)
            seen[bus].append(figures["cpu_ms_per_turn"])
            print(f"# round {r} {bus}: {json.dumps(figures)}", file=sys.stderr)
        ratios.append(seen[second][-1] / seen[first][-1])
    for meter in meters.values():
        await meter.redis.aclose()
    out: dict[str, float] = {}
    for bus, values in seen.items():
        out[f"interleaved_{bus}_cpu_ms_per_turn_4"] = statistics.median(values)
        out[f"interleaved_{bus}_cpu_ms_per_turn_4_rounds_spread"] = max(values) / min(values) - 1
    out[f"interleaved_{second}_cpu_ms_per_turn_4_ratio"] = statistics.median(ratios)
    out[f"interleaved_{second}_cpu_ms_per_turn_4_ratio_min"] = min(ratios)
    out[f"interleaved_{second}_cpu_ms_per_turn_4_ratio_max"] = max(ratios)
    return out


def run_on(bus: str, args: argparse.Namespace) -> dict[str, float]:
    """Every phase on a bus of topology ``bus``."""
    with contextlib.ExitStack() as held:
        return asyncio.run(measure(_stack(held, bus, args), args))


def _stack(
    held: contextlib.ExitStack, bus: str, args: argparse.Namespace, second: int = 0
) -> Cluster:
    """A harness cluster on a bus of topology ``bus``, the scripted model on its fabric, its
    core host and ``w1`` ready; all of it ends with ``held`` (``second``: a second cluster of
    this process, see ``Cluster.start``)."""
    tmp = held.enter_context(tempfile.TemporaryDirectory(prefix="soong-scale-"))
    model = _model(args.model_wait_s)
    kwargs: dict[str, Any] = {} if bus == "standalone" else {"bus": bus}  # older harnesses: one
    if second:
        kwargs["second"] = second
    cl = held.enter_context(cluster(Path(tmp), config=CONFIG, **kwargs))
    model.host = cl.fabric.engine_ip
    model.start_in_thread()
    held.callback(model.stop_thread)
    cl.env.update(
        {
            "SOONG_MODEL_PROVIDER": "openai",
            "SOONG_MODEL_NAME": "fake-model",
            "SOONG_MODEL_BASE_URL": model.sdk_base_url,
            "OPENAI_API_KEY": "sk-test-not-a-real-key-000000",
        }
    )
    started = [cl.add_host("core", CORE, wait=False), _worker_host(cl, 1, wait=False)]
    for host in started:
        host.wait_ready()
    return cl


if __name__ == "__main__":
    main()
