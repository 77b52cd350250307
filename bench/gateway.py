"""Gateway benchmark: SSE delivery latency and ``GET /v1/sessions/{id}`` throughput.

Starts its own stack (``soong-agent up`` with the scripted fake model, via the test harness's
``start_stack``), then measures on this machine:

* SSE added latency — for every ``text_delta`` event, the time from the event's ``created_at``
  (stamped in the run-worker when the provider's chunk arrived) to the moment the HTTP client read
  its ``data:`` line; same machine, same clock. The provider is a fake OpenAI server in its own
  process (``bench/helpers/paced_provider.py``) streaming 100 chunks 20 ms apart per answer, as a
  model does (~50 chunks/s per stream). ``sse_added_*_1``: one stream (runs one after another).
  ``sse_added_*_50``: 50 concurrent streams — 50 sessions each posting ``stream=true`` messages in
  a loop, their first messages spread over one answer's length (as independent users' messages
  arrive), counting the deltas received while all 50 sessions are streaming.
  ``sse_added_*_50_sync_start``: the same 50 sessions with every first message posted at the same
  instant, so that 50 runs start (and, as answers are equally long, end) together, every run's
  set-up competing with the other streams' deltas for the two cores — a burst, kept as its own
  figure;
* the same with the in-process scripted model, which answers every turn (a tool call, then ~1 KB)
  at once, so 50 sessions run agent turns back to back and saturate both cores:
  ``sse_added_*_saturated`` — what streaming costs when the machine has no idle time left;
* ``GET /v1/sessions/{id}`` requests/s with 50 concurrent keep-alive connections for a fixed
  time (a minimal HTTP/1.1 client: httpx itself saturated a core at ~300 requests/s here).

The last line printed is one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared"), str(ROOT / "bench")]

import httpx  # noqa: E402
from helpers.homes import stack_home  # noqa: E402
from helpers.http_load import get_rps  # noqa: E402
from helpers.proc_cpu import stack_cpu  # noqa: E402

from tests.conftest import start_stack, stop_stack  # noqa: E402

CONFIG = """
[gateway]
rate_limit_per_s = 1000000.0
rate_limit_burst = 1000000
max_sse_streams_per_key = 1000
"""
RUNS_1 = 60
ROUNDS_50 = 6
PACED_RUNS_1 = 3
PACED_ROUNDS_50 = 3
SYNC_ROUNDS_50 = 2
PACED_CHUNKS = 100
PACED_INTERVAL_MS = 20
RPS_SECONDS = 5.0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


Sample = tuple[float, float, float]  # (received at, chunk → client ms, Redis XADD → client ms)


class _Phase:
    """What one phase of streams received, and the gateway's CPU while they streamed."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.events = 0  # every SSE event received (id: lines), deltas or not
        self.gateway_cpu_s = 0.0


def _gateway_cpu(root: int | None) -> float:
    if root is None:
        return 0.0
    return sum(cpu for role, cpu in stack_cpu(root).values() if role == "gateway")


async def _stream_run(url: str, key: str, session_id: str, phase: _Phase) -> None:
    """One ``stream=true`` run over a raw HTTP/1.1 connection (chunked SSE decoded by hand, so the
    client's own CPU does not swamp what is measured); per text delta: when it was read, chunk →
    client, and Redis XADD → client."""
    samples = phase.samples
    parsed = httpx.URL(url)
    body = json.dumps({"text": "bench", "stream": True}).encode()
    reader, writer = await asyncio.open_connection(parsed.host, parsed.port)
    try:
        writer.write(
            f"POST /v1/sessions/{session_id}/messages HTTP/1.1\r\nHost: {parsed.host}\r\n"
            f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"chunked" in head.lower(), head[:300]
        pending = b""
        delta = False
        entry_ms = 0.0
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await reader.readexactly(size + 2)
            now = time.time()
            if size == 0:
                return
            pending += chunk[:-2]
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode()
                if line.startswith("id: "):
                    phase.events += 1
                    head_id = line[4:].split("-", 1)[0]  # Redis server time of the XADD
                    entry_ms = float(head_id) if head_id.isdigit() else now * 1000
                elif line.startswith("event: "):
                    delta = line == "event: text_delta"
                elif delta and line.startswith("data: "):
                    created = json.loads(line[6:])["created_at"]
                    added = (now - datetime.fromisoformat(created).timestamp()) * 1000
                    samples.append((now, added, now * 1000 - entry_ms))
    finally:
        writer.close()


async def _sessions(client: httpx.AsyncClient, n: int) -> list[str]:
    out = []
    for _ in range(n):
        r = await client.post("/v1/sessions", json={})
        out.append(r.json()["session_id"])
    return out


async def _sse(
    url: str,
    key: str,
    streams: int,
    runs_each: int,
    *,
    spread_s: float = 0.0,
    root: int | None = None,
) -> tuple[list[float], list[float], _Phase]:
    """Added latencies and Redis → client hops of ``streams`` sessions streaming ``runs_each``
    runs each. ``spread_s`` > 0: session ``i`` starts ``i * spread_s / streams`` late, and only
    deltas read while every session is inside its loop (after the last one started, before the
    first one finished) count. ``spread_s`` = 0: all start together and every delta counts.
    The phase also counts every event received and, given the stack's ``root`` pid, the
    gateway's CPU over the whole phase (after the warm-up)."""
    limits = httpx.Limits(max_connections=streams + 10, max_keepalive_connections=streams + 10)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as c:
        sessions = await _sessions(c, streams)
        await _stream_run(url, key, sessions[0], _Phase())  # warm-up
        phase = _Phase()
        spans: list[tuple[float, float]] = []

        async def loop(i: int, session_id: str) -> None:
            await asyncio.sleep(i * spread_s / streams)
            started = time.time()
            for _ in range(runs_each):
                await _stream_run(url, key, session_id, phase)
            spans.append((started, time.time()))

        cpu_before = _gateway_cpu(root)
        await asyncio.gather(*(loop(i, s) for i, s in enumerate(sessions)))
        phase.gateway_cpu_s = _gateway_cpu(root) - cpu_before
    samples = phase.samples
    if spread_s > 0:
        opened, closed = max(a for a, _ in spans), min(b for _, b in spans)
        samples = [s for s in samples if opened <= s[0] <= closed]
    return [s[1] for s in samples], [s[2] for s in samples], phase


async def _rps(url: str, key: str, clients: int, seconds: float) -> float:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as c:
        session_id = (await _sessions(c, 1))[0]
    return await get_rps(url, f"/v1/sessions/{session_id}", key, clients, seconds)


def _paced_provider() -> tuple[subprocess.Popen[str], str]:
    """The paced fake provider as a process of its own; returns it and its SDK base URL."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "helpers" / "paced_provider.py"), str(PACED_CHUNKS)]
        + [str(PACED_INTERVAL_MS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _per_event_us(phase: _Phase) -> float:
    return round(phase.gateway_cpu_s * 1e6 / max(phase.events, 1), 1)


def main() -> int:
    """Run the benchmark and print the figures."""
    result: dict[str, Any] = {}
    provider, base_url = _paced_provider()
    try:
        home = stack_home("bench-gateway-")
        (home / "config.toml").write_text(CONFIG)
        env = {
            "SOONG_MODEL_PROVIDER": "openai",
            "SOONG_MODEL_NAME": "fake-model",
            "SOONG_MODEL_BASE_URL": base_url,
        }
        stack = start_stack(home, workers=2, extra_env=env)
        try:
            url, key = stack.gateway_url, stack.api_key
            root = stack.process.pid
            one, one_hops, one_phase = asyncio.run(_sse(url, key, 1, PACED_RUNS_1, root=root))
            answer_s = PACED_CHUNKS * PACED_INTERVAL_MS / 1000
            fifty, fifty_hops, fifty_phase = asyncio.run(
                _sse(url, key, 50, PACED_ROUNDS_50, spread_s=answer_s, root=root)
            )
            sync, sync_hops, _ = asyncio.run(_sse(url, key, 50, SYNC_ROUNDS_50))
        finally:
            stop_stack(stack.process)
    finally:
        provider.kill()
        provider.wait()
    home = stack_home("bench-gateway-")
    (home / "config.toml").write_text(CONFIG)
    stack = start_stack(home, workers=2, extra_env={"SOONG_MODEL_PROVIDER": "fake"})
    try:
        url, key = stack.gateway_url, stack.api_key
        sat_one, _, _ = asyncio.run(_sse(url, key, 1, RUNS_1))
        sat_fifty, sat_hops, _ = asyncio.run(_sse(url, key, 50, ROUNDS_50))
        rps = asyncio.run(_rps(url, key, 50, RPS_SECONDS))
    finally:
        stop_stack(stack.process)
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
        # The gateway process's CPU over the 50-stream paced phase ÷ the events it delivered
        # (every SSE event, not only deltas), and the same for one stream at a time.
        "gateway_cpu_us_per_event_50": _per_event_us(fifty_phase),
        "gateway_cpu_us_per_event_1": _per_event_us(one_phase),
        "sse_samples_1": len(one),
        "sse_samples_50": len(fifty),
        "sse_added_p50_ms_50_sync_start": round(statistics.median(sync), 2),
        "sse_added_p99_ms_50_sync_start": round(_pct(sync, 0.99), 2),
        "sse_redis_to_client_p99_ms_50_sync_start": round(_pct(sync_hops, 0.99), 2),
        "sse_added_p50_ms_1_saturated": round(statistics.median(sat_one), 2),
        "sse_added_p99_ms_1_saturated": round(_pct(sat_one, 0.99), 2),
        "sse_added_p50_ms_50_saturated": round(statistics.median(sat_fifty), 2),
        "sse_added_p99_ms_50_saturated": round(_pct(sat_fifty, 0.99), 2),
        "sse_redis_to_client_p50_ms_50_saturated": round(statistics.median(sat_hops), 2),
    }
    print(f"SSE paced: {len(one)} / {len(fifty)} / {len(sync)} deltas", file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
