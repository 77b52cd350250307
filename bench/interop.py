"""Interop benchmark: what each interop endpoint adds per streamed event over our own SSE.

Starts its own stack (``soong-agent up``) behind the paced fake provider
(``bench/helpers/paced_provider.py``: ``CHUNKS`` text chunks ``INTERVAL_MS`` apart per answer,
each naming its index) and an assistant, then streams answers through every path in turn, in
one run, rotating the order each round so that the machine's load hits them alike:

* ``own_sse`` — ``POST /v1/sessions/{id}/messages`` with ``stream=true`` (the baseline);
* ``openai_chat`` — ``POST /v1/openai/chat/completions`` with ``stream: true``;
* ``openai_responses`` — ``POST /v1/openai/responses`` with ``stream: true``;
* ``mcp`` — ``tools/call`` on ``/mcp`` with a progress token (the assistant is the tool): each
  progress notification carries the text read since the last;
* ``a2a`` — ``SendStreamingMessage`` on ``/a2a/{assistant}``: the ``answer`` artifact's chunks.

Every path is read the same way, as raw HTTP (chunked SSE decoded by hand), so that no client
library's own per-event cost is counted as the gateway's (a client SDK's parsing is the
client's CPU, whichever door it uses).

Per chunk of the answer: the time from the run-worker's stamp on the text delta that carried it
(its ``created_at``; for the OpenAI paths read afterwards from the run's own event stream, which
the live stream keeps) to the moment the client read the bytes carrying it — same machine, same
clock. Every path is one function returning those samples (``PATHS``).
One stream at a time (``…_ms_per_event``, the median; ``…_p90_ms``), then ``CONCURRENT`` at once
per path (``…_ms_per_event_10``). ``interop_*_ratio``: a path's median ÷ own SSE's in the same
run (goal ≤ 1.2).

The last line printed is one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared"), str(ROOT / "bench")]

import httpx  # noqa: E402
from helpers.homes import stack_home  # noqa: E402

from tests.conftest import start_stack, stop_stack  # noqa: E402

CONFIG = """
[gateway]
rate_limit_per_s = 1000000.0
rate_limit_burst = 1000000
max_sse_streams_per_key = 1000
"""
CHUNKS = 50
INTERVAL_MS = 20
ROUNDS = 6
CONCURRENT = 10
ROUNDS_CONCURRENT = 2
ASSISTANT = "bench"
_INDEX = re.compile(r"chunk (\d+) ")


@dataclass
class Ctx:
    """The running stack and a client of it."""

    url: str
    key: str
    http: httpx.AsyncClient


# (chunk index, read at (epoch s)) for one streamed answer, and how to find its run's events.
Reads = list[tuple[int, float]]


async def _stream(
    ctx: Ctx, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[dict[str, str], list[tuple[float, str, str]]]:
    """POST ``body`` on a connection of its own (chunked SSE decoded by hand, so the client's
    CPU does not swamp what is measured); the response headers and every ``(read at, event,
    data)`` frame."""
    parsed = httpx.URL(ctx.url)
    payload = json.dumps(body).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    reader, writer = await asyncio.open_connection(parsed.host, parsed.port)
    frames: list[tuple[float, str, str]] = []
    try:
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {parsed.host}\r\nAuthorization: Bearer {ctx.key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n{extra}\r\n"
            .encode() + payload
        )  # fmt: skip
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"chunked" in head.lower(), head[:300]
        fields = dict(
            line.decode().lower().split(": ", 1)
            for line in head.split(b"\r\n")[1:]
            if b": " in line
        )
        pending = b""
        event = ""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await reader.readexactly(size + 2)
            now = time.time()
            if size == 0:
                return fields, frames
            pending += chunk[:-2]
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode()
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    frames.append((now, event, line[6:]))
                elif not line:
                    event = ""
    finally:
        writer.close()


def _indexes(text: str) -> list[int]:
    return [int(i) for i in _INDEX.findall(text)]


async def _stamps(ctx: Ctx, session_id: str, run_id: str) -> dict[int, float]:
    """When the run-worker stamped the delta carrying each chunk (the run's own events)."""
    stamps: dict[int, float] = {}
    url = f"/v1/sessions/{session_id}/runs/{run_id}/events"
    async with ctx.http.stream("GET", url) as response:
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "text_delta":
                data = json.loads(line[6:])
                at = datetime.fromisoformat(data["created_at"]).timestamp()
                for i in _indexes(data["text"]):
                    stamps.setdefault(i, at)
    return stamps


def _latencies(reads: Reads, stamps: dict[int, float]) -> list[float]:
    return [(at - stamps[i]) * 1000 for i, at in reads if i in stamps]


async def _new_session(ctx: Ctx) -> str:
    made = await ctx.http.post("/v1/sessions", json={"assistant": ASSISTANT})
    return str(made.json()["session_id"])


async def own_sse(ctx: Ctx) -> list[float]:
    """The baseline: our own SSE of a message posted with ``stream=true``."""
    session_id = await _new_session(ctx)
    body = {"text": "bench", "stream": True}
    _, frames = await _stream(ctx, f"/v1/sessions/{session_id}/messages", body)
    out = []
    for at, event, data in frames:
        if event == "text_delta":
            delta = json.loads(data)
            stamp = datetime.fromisoformat(delta["created_at"]).timestamp()
            out += [(at - stamp) * 1000 for _ in _indexes(delta["text"])]
    return out


async def openai_chat(ctx: Ctx) -> list[float]:
    """Chat Completions, streamed (a new session per answer, as own_sse has)."""
    body = {"model": ASSISTANT, "messages": [{"role": "user", "content": "bench"}], "stream": True}
    headers, frames = await _stream(ctx, "/v1/openai/chat/completions", body)
    reads: Reads = []
    for at, _, data in frames:
        if data != "[DONE]":
            for choice in json.loads(data).get("choices", ()):
                reads += [(i, at) for i in _indexes(choice["delta"].get("content") or "")]
    stamps = await _stamps(ctx, headers["x-soong-session-id"], headers["x-run-id"])
    return _latencies(reads, stamps)


async def openai_responses(ctx: Ctx) -> list[float]:
    """The Responses API, streamed."""
    body = {"model": ASSISTANT, "input": "bench", "stream": True}
    headers, frames = await _stream(ctx, "/v1/openai/responses", body)
    reads: Reads = []
    for at, event, data in frames:
        if event == "response.output_text.delta":
            reads += [(i, at) for i in _indexes(json.loads(data)["delta"])]
    stamps = await _stamps(ctx, headers["x-soong-session-id"], headers["x-run-id"])
    return _latencies(reads, stamps)


async def mcp(ctx: Ctx) -> list[float]:
    """The MCP server: ``tools/call`` with a progress token, over Streamable HTTP (stateless)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": ASSISTANT,
            "arguments": {"message": "bench"},
            "_meta": {"progressToken": 1},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    _, frames = await _stream(ctx, "/mcp", body, headers)
    reads: Reads = []
    ids: dict[str, str] = {}
    for at, _, data in frames:
        message = json.loads(data)
        if message.get("method") == "notifications/progress":
            reads += [(i, at) for i in _indexes(message["params"].get("message") or "")]
        elif "result" in message:
            ids = message["result"]["structuredContent"]
    return _latencies(reads, await _stamps(ctx, ids["session_id"], ids["run_id"]))


async def a2a(ctx: Ctx) -> list[float]:
    """The A2A endpoint: ``SendStreamingMessage``, the answer artifact's chunks."""
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "bench"}]}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    _, frames = await _stream(ctx, f"/a2a/{ASSISTANT}", body, {"A2A-Version": "1.0"})
    reads: Reads = []
    session_id = run_id = ""
    for at, _, data in frames:
        result = json.loads(data).get("result") or {}
        if "task" in result:
            session_id, run_id = result["task"]["contextId"], result["task"]["id"]
        update = result.get("artifactUpdate") or {}
        # The chunks as they stream; the last one repeats the whole answer (the stored text).
        if update.get("artifact", {}).get("name") == "answer" and not update.get("lastChunk"):
            text = "".join(part.get("text", "") for part in update["artifact"].get("parts", ()))
            reads += [(i, at) for i in _indexes(text)]
    return _latencies(reads, await _stamps(ctx, session_id, run_id))


PATHS: dict[str, Callable[[Ctx], Awaitable[list[float]]]] = {
    "own_sse": own_sse,
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "mcp": mcp,
    "a2a": a2a,
}


async def _measure(url: str, key: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=CONCURRENT * 4, max_keepalive_connections=CONCURRENT * 4)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as http:
        made = await http.post("/v1/assistants", json={"name": ASSISTANT})
        assert made.status_code == 201, made.text
        ctx = Ctx(url, key, http)
        names = list(PATHS)
        for name in names:  # warm-up: each path once
            await PATHS[name](ctx)
        one: dict[str, list[float]] = {n: [] for n in names}
        many: dict[str, list[float]] = {n: [] for n in names}
        for round_ in range(ROUNDS):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                one[name] += await PATHS[name](ctx)
        for round_ in range(ROUNDS_CONCURRENT):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                for samples in await asyncio.gather(*(PATHS[name](ctx) for _ in range(CONCURRENT))):
                    many[name] += samples
    result: dict[str, Any] = {}
    base, base_many = statistics.median(one["own_sse"]), statistics.median(many["own_sse"])
    for name in names:
        key_ = "interop_own_sse" if name == "own_sse" else f"interop_{name}"
        p50 = statistics.median(one[name])
        result[f"{key_}_ms_per_event"] = round(p50, 3)
        result[f"{key_}_p90_ms"] = round(statistics.quantiles(one[name], n=10)[-1], 3)
        result[f"{key_}_ms_per_event_{CONCURRENT}"] = round(statistics.median(many[name]), 3)
        result[f"{key_}_samples"] = len(one[name])
        if name != "own_sse":
            result[f"{key_}_ratio"] = round(p50 / base, 3)
            result[f"{key_}_ratio_{CONCURRENT}"] = round(
                statistics.median(many[name]) / base_many, 3
            )
    return result


def main() -> int:
    """Run the benchmark and print the figures."""
    provider = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "helpers" / "paced_provider.py"), str(CHUNKS)]
        + [str(INTERVAL_MS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert provider.stdout is not None
    base_url = provider.stdout.readline().strip()
    try:
        home = stack_home("bench-interop-")
        (home / "config.toml").write_text(CONFIG)
        env = {
            "SOONG_MODEL_PROVIDER": "openai",
            "SOONG_MODEL_NAME": "fake-model",
            "SOONG_MODEL_BASE_URL": base_url,
        }
        stack = start_stack(home, workers=2, extra_env=env)
        try:
            result = asyncio.run(_measure(stack.gateway_url, stack.api_key))
        finally:
            stop_stack(stack.process)
    finally:
        provider.kill()
        provider.wait()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
