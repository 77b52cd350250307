"""How fast one SDK client consumes a run's events, and what the SDK costs over a raw SSE read.

The stack is the real one, started by the SDK's own local mode (``soong_agent.local``) with the
scripted model. One real run is made; then its Redis event stream is rewritten to hold
``EVENTS`` of that run's own events (its status changes, tool calls, text deltas, usage and
node events, repeated) followed by its ``run_finished`` — the fastest run there can be: every
event is there at once, so the gateway serves them as fast as it can and the reader is measured.

The same stream (``GET …/runs/{run_id}/events``) is then read, alternately, ``ROUNDS`` times each:

- raw: ``httpx`` streaming the response, frames split on blank lines, each frame's ``data``
  parsed with ``json.loads`` — what a hand-rolled SSE client does, with no types;
- SDK: ``AsyncClient…run(run_id).events()`` — frames decoded and validated into the server's
  typed runtime events, resume bookkeeping and helper state included.

Printed last, one JSON line: ``events_per_s`` (events the SDK yields per second, median round),
``sdk_ratio`` (the SDK's cost per event over the raw read's: the client process's CPU time per
event, ``time.process_time``, medians; goal ≤ 1.15), ``wall_ratio`` (the same for elapsed time —
on one machine the gateway serving the stream usually sets the pace of both readers),
``raw_events_per_s`` and the CPU microseconds per event of each (``*_cpu_us_per_event``).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

import httpx  # noqa: E402

import soong_agent  # noqa: E402
from agent_core.bus import BusNames, make_redis  # noqa: E402

EVENTS = 20_000
ROUNDS = 5
CONFIG = """
[gateway]
rate_limit_per_s = 1000000.0
rate_limit_burst = 1000000
max_sse_streams_per_key = 1000
"""


async def _fast_run(client: soong_agent.LocalClient) -> tuple[str, str]:
    """A finished run whose stream holds ``EVENTS`` events, all written already."""
    session = await client.create_session()
    stream = session.send("benchmark")
    await stream.wait()
    assert stream.run_id is not None
    stack = json.loads((client.home / "run" / "stack.json").read_text())
    redis = make_redis(stack["redis_url"])
    key = BusNames("soong").run_events(session.id, stream.run_id)
    try:
        entries: Any = await redis.xrange(key)
        body = [fields[b"data"] for _, fields in entries[:-1]]
        last = entries[-1][1][b"data"]
        assert b'"run_finished"' in last
        await redis.delete(key)
        for start in range(0, EVENTS - 1, 1000):
            async with redis.pipeline(transaction=False) as pipe:
                for i in range(start, min(start + 1000, EVENTS - 1)):
                    pipe.xadd(key, {"data": body[i % len(body)]})
                await pipe.execute()
        await redis.xadd(key, {"data": last})
        await redis.expire(key, 3600)
    finally:
        await redis.aclose()
    return session.id, stream.run_id


async def _raw(url: str, key: str) -> int:
    count = 0
    buffer = b""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(timeout=60) as http,
        http.stream("GET", url, headers=headers) as response,
    ):
        async for chunk in response.aiter_bytes():
            frames = (buffer + chunk).split(b"\n\n")
            buffer = frames.pop()
            for frame in frames:
                for line in frame.split(b"\n"):
                    if line.startswith(b"data: "):
                        json.loads(line[6:])
                        count += 1
    return count


async def _sdk(client: soong_agent.AsyncClient, session_id: str, run_id: str) -> int:
    count = 0
    async for _ in client.session(session_id).run(run_id).events():
        count += 1
    return count


async def _timed(reader: Any) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    count = await reader
    return time.perf_counter() - wall, time.process_time() - cpu, count


async def measure() -> dict[str, Any]:
    async with soong_agent.local(workers=1, fake_provider=True, config=CONFIG) as client:
        session_id, run_id = await _fast_run(client)
        url = f"{client.base_url}/v1/sessions/{session_id}/runs/{run_id}/events"
        raw: list[tuple[float, float, int]] = []
        sdk: list[tuple[float, float, int]] = []
        await _raw(url, client.api_key)  # warm both paths (connections, caches) once
        await _sdk(client, session_id, run_id)
        for _ in range(ROUNDS):
            raw.append(await _timed(_raw(url, client.api_key)))
            sdk.append(await _timed(_sdk(client, session_id, run_id)))
    assert {r[2] for r in raw} == {EVENTS} and {s[2] for s in sdk} == {EVENTS}, (raw, sdk)
    raw_s = statistics.median(r[0] for r in raw)
    sdk_s = statistics.median(s[0] for s in sdk)
    raw_cpu = statistics.median(r[1] for r in raw)
    sdk_cpu = statistics.median(s[1] for s in sdk)
    return {
        "events_per_s": round(EVENTS / sdk_s),
        "sdk_ratio": round(sdk_cpu / raw_cpu, 3),
        "wall_ratio": round(sdk_s / raw_s, 3),
        "raw_events_per_s": round(EVENTS / raw_s),
        "sdk_cpu_us_per_event": round(sdk_cpu / EVENTS * 1e6, 1),
        "raw_cpu_us_per_event": round(raw_cpu / EVENTS * 1e6, 1),
        "events": EVENTS,
        "rounds": ROUNDS,
    }


def main() -> None:
    print(json.dumps(asyncio.run(measure())))


if __name__ == "__main__":
    main()
