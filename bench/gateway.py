"""Gateway benchmark: SSE delivery latency and ``GET /v1/sessions/{id}`` throughput.

Starts its own stack (``soong-agent up`` with the scripted fake model, via the test harness's
``start_stack``), then measures on this machine:

* SSE added latency — for every ``text_delta`` event, the time from the event's ``created_at``
  (stamped in the run-worker when the model emitted the chunk) to the moment the HTTP client read
  its ``data:`` line; same machine, same clock. With 1 stream (runs one after another) and with
  50 concurrent streams (50 sessions, each posting ``stream=true`` messages in a loop);
* ``GET /v1/sessions/{id}`` requests/s with 50 concurrent clients for a fixed time.

The last line printed is one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

import httpx  # noqa: E402

from tests.conftest import start_stack, stop_stack  # noqa: E402

CONFIG = """
[gateway]
rate_limit_per_s = 1000000.0
rate_limit_burst = 1000000
max_sse_streams_per_key = 1000
"""
RUNS_1 = 60
ROUNDS_50 = 6
RPS_SECONDS = 5.0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _stream_run(
    client: httpx.AsyncClient, session_id: str, samples: list[float], hops: list[float]
) -> None:
    """One ``stream=true`` run; per text delta: chunk → client, and Redis XADD → client."""
    body = {"text": "bench", "stream": True}
    async with client.stream("POST", f"/v1/sessions/{session_id}/messages", json=body) as r:
        assert r.status_code == 200, await r.aread()
        delta = False
        entry_ms = 0.0
        async for line in r.aiter_lines():
            now = time.time()
            if line.startswith("id: "):
                head = line[4:].split("-", 1)[0]  # Redis server time of the XADD
                entry_ms = float(head) if head.isdigit() else now * 1000
            elif line.startswith("event: "):
                delta = line == "event: text_delta"
            elif delta and line.startswith("data: "):
                created = json.loads(line[6:])["created_at"]
                samples.append((now - datetime.fromisoformat(created).timestamp()) * 1000)
                hops.append(now * 1000 - entry_ms)


async def _sessions(client: httpx.AsyncClient, n: int) -> list[str]:
    out = []
    for _ in range(n):
        r = await client.post("/v1/sessions", json={})
        out.append(r.json()["session_id"])
    return out


async def _sse(url: str, key: str, streams: int, runs_each: int) -> tuple[list[float], list[float]]:
    limits = httpx.Limits(max_connections=streams + 10, max_keepalive_connections=streams + 10)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as c:
        sessions = await _sessions(c, streams)
        await _stream_run(c, sessions[0], [], [])  # warm-up
        samples: list[float] = []
        hops: list[float] = []

        async def loop(session_id: str) -> None:
            for _ in range(runs_each):
                await _stream_run(c, session_id, samples, hops)

        await asyncio.gather(*(loop(s) for s in sessions))
        return samples, hops


async def _rps(url: str, key: str, clients: int, seconds: float) -> float:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30, limits=limits) as c:
        session_id = (await _sessions(c, 1))[0]
        path = f"/v1/sessions/{session_id}"
        for _ in range(200):
            assert (await c.get(path)).status_code == 200
        count = 0
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                r = await c.get(path)
                assert r.status_code == 200, r.text
                count += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        return count / (time.perf_counter() - started)


def main() -> int:
    """Run the benchmark and print the figures."""
    home = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    (home / "config.toml").write_text(CONFIG)
    stack = start_stack(home, workers=2, extra_env={"SOONG_MODEL_PROVIDER": "fake"})
    result: dict[str, Any] = {}
    try:
        one, one_hops = asyncio.run(_sse(stack.gateway_url, stack.api_key, 1, RUNS_1))
        fifty, fifty_hops = asyncio.run(_sse(stack.gateway_url, stack.api_key, 50, ROUNDS_50))
        rps = asyncio.run(_rps(stack.gateway_url, stack.api_key, 50, RPS_SECONDS))
        result = {
            "sse_added_p50_ms_1": round(statistics.median(one), 2),
            "sse_added_p99_ms_1": round(_pct(one, 0.99), 2),
            "sse_added_p50_ms_50": round(statistics.median(fifty), 2),
            "sse_added_p99_ms_50": round(_pct(fifty, 0.99), 2),
            "get_session_rps_50": round(rps, 1),
            # The gateway's own share: Redis XADD (entry id time) → the client read the frame.
            "sse_redis_to_client_p50_ms_1": round(statistics.median(one_hops), 2),
            "sse_redis_to_client_p50_ms_50": round(statistics.median(fifty_hops), 2),
            "sse_redis_to_client_p99_ms_50": round(_pct(fifty_hops, 0.99), 2),
            "sse_samples_1": len(one),
            "sse_samples_50": len(fifty),
        }
        print(f"SSE 1 stream: {len(one)} deltas; 50 streams: {len(fifty)} deltas", file=sys.stderr)
    finally:
        stop_stack(stack.process)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
