"""Provider adapter overhead: ModelEvents/s and µs per chunk vs. bare httpx on the same bytes.

For each provider (openai, anthropic, ollama) the bench starts its wire-faithful fake server,
streams one long scripted response (text deltas, two tool calls with split arguments, usage)
through the adapter, and reads the very same response — same request body, same bytes, same
server — with bare httpx (``aiter_bytes``, no parsing), in the same run.

Robust on a small, loaded machine: runs come in adapter/bare pairs in ABBA order, a full
garbage collection precedes every timed run, and ``<provider>_ratio`` is the median of the
per-pair ratios (wall clock), so load that drifts between pairs cancels out. The µs figures
are medians of the wall-clock runs. ``<provider>_cpu_ratio`` is the same ratio on process CPU
time (time stolen by other processes does not count; server, client and kernel time do).

The fake servers run on the same event loop as the client, so their cost per chunk is part of
both figures; ``<provider>_added_us_per_chunk`` (the median per-pair difference, adapter minus
bare) is the adapter's own cost. ``bare_us_per_chunk`` is the mean of the three bare figures.
The last line printed is one JSON object. Goal: every ``<provider>_ratio`` ≤ 1.25.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

import httpx  # noqa: E402

from agent_core.provider import ProviderRegistry, ProviderSettings, aclose_adapter  # noqa: E402
from agent_core.types.protocol import ModelMessage, ModelRequest, TextBlock  # noqa: E402
from tests.fakes import script as s  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropicServer  # noqa: E402
from tests.fakes.http_server import FakeHTTPServer  # noqa: E402
from tests.fakes.ollama_server import FakeOllamaServer  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402

TEXT_CHUNKS = 4000
RUNS = 21
SERVERS: dict[str, tuple[type[FakeHTTPServer], str]] = {
    "openai": (FakeOpenAIServer, "/v1/chat/completions"),
    "anthropic": (FakeAnthropicServer, "/v1/messages"),
    "ollama": (FakeOllamaServer, "/api/chat"),
}


def long_turn(_request: Any = None) -> s.ScriptedTurn:
    """Many short text deltas (a few multi-byte), then two tool calls and usage."""
    steps: list[s.Step] = [
        s.Text(text=f"tok{i} " if i % 50 else "日本 ") for i in range(TEXT_CHUNKS)
    ]
    steps += s.tool_call(0, "call_a", "get_weather", ['{"ci', 'ty": ', '"Paris"}'])
    steps += s.tool_call(1, "call_b", "get_time", ['{"city":', ' "Tokyo"}'])
    steps += [s.Usage(input_tokens=100, output_tokens=TEXT_CHUNKS), s.Finish(reason="tool_use")]
    return s.ScriptedTurn(steps=steps)


REQUEST = ModelRequest(
    model="bench-model",
    messages=[ModelMessage(role="user", content=[TextBlock(text="go")])],
)


async def through_adapter(adapter: Any) -> tuple[float, float, int]:
    """Wall and CPU seconds to stream one response through the adapter, and its event count."""
    gc.collect()
    count = 0
    wall, cpu = time.perf_counter(), time.process_time()
    async with contextlib.aclosing(adapter.stream(REQUEST)) as events:
        async for _event in events:
            count += 1
    return time.perf_counter() - wall, time.process_time() - cpu, count


async def through_httpx(client: httpx.AsyncClient, url: str, body: bytes) -> tuple[float, float]:
    """Wall and CPU seconds to read the same response's bytes with bare httpx."""
    gc.collect()
    headers = {"content-type": "application/json"}
    wall, cpu = time.perf_counter(), time.process_time()
    async with client.stream("POST", url, content=body, headers=headers) as resp:
        async for _chunk in resp.aiter_bytes():
            pass
    return time.perf_counter() - wall, time.process_time() - cpu


async def measure(provider: str) -> dict[str, float]:
    """Medians over alternating runs: µs per chunk through the adapter and bare, ratios, events/s."""
    server_cls, path = SERVERS[provider]
    server = server_cls(default=long_turn)
    async with server, httpx.AsyncClient(timeout=30) as client:
        base_url = server.sdk_base_url  # type: ignore[attr-defined]
        settings = ProviderSettings(provider=provider, base_url=base_url, api_key="bench")
        adapter = ProviderRegistry().create(settings)
        try:
            await through_adapter(adapter)  # warm-up; also records the exact request body
            body = next(r.body for r in reversed(server.requests) if r.path == path)
            frames = sum(isinstance(a, bytes) for a in server.render(long_turn(), json.loads(body)))
            await through_httpx(client, server.base_url + path, body)
            runs: list[tuple[float, float, float, float]] = []  # adapter wall/cpu, bare wall/cpu
            events = 0
            for i in range(RUNS):
                # ABBA order: a load change during the pair weighs on both sides alike.
                if i % 2:
                    bare = await through_httpx(client, server.base_url + path, body)
                    wall, cpu, events = await through_adapter(adapter)
                else:
                    wall, cpu, events = await through_adapter(adapter)
                    bare = await through_httpx(client, server.base_url + path, body)
                runs.append((wall, cpu, *bare))
        finally:
            await aclose_adapter(adapter)
    med = [statistics.median(r[k] for r in runs) for k in range(4)]
    return {
        "us_per_chunk": med[0] / frames * 1e6,
        "bare_us_per_chunk": med[2] / frames * 1e6,
        # The median of per-pair ratios: robust to load that drifts between pairs.
        "added_us_per_chunk": statistics.median(r[0] - r[2] for r in runs) / frames * 1e6,
        "ratio": statistics.median(r[0] / r[2] for r in runs),
        "cpu_ratio": statistics.median(r[1] / r[3] for r in runs),
        "events_per_s": events / med[0],
        "frames": frames,
    }


async def main() -> dict[str, float]:
    """Measure every provider; returns the flat result object."""
    result: dict[str, float] = {}
    bares = []
    for provider in SERVERS:
        m = await measure(provider)
        print(f"# {provider}: {json.dumps(m)}", file=sys.stderr)
        bares.append(m["bare_us_per_chunk"])
        result[f"{provider}_us_per_chunk"] = round(m["us_per_chunk"], 2)
        result[f"{provider}_bare_us_per_chunk"] = round(m["bare_us_per_chunk"], 2)
        result[f"{provider}_added_us_per_chunk"] = round(m["added_us_per_chunk"], 2)
        result[f"{provider}_events_per_s"] = round(m["events_per_s"])
        result[f"{provider}_ratio"] = round(m["ratio"], 3)
        result[f"{provider}_cpu_ratio"] = round(m["cpu_ratio"], 3)
        result[f"{provider}_chunks"] = m["frames"]
    result["bare_us_per_chunk"] = round(statistics.mean(bares), 2)
    return result


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
