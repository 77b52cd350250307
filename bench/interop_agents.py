"""Added latency per streamed event through the MCP server and the A2A endpoint, against our SSE.

Starts its own stack (``soong-agent up`` with the scripted demo model) and one assistant, then
runs the demo's ``long`` answer (a text delta per word, 20 ms apart) through each door, one run
at a time, the same number of runs each:

* ``sse``: ``POST …/messages`` with ``stream=true``; for each ``text_delta``, the time from its
  ``created_at`` (stamped in the run-worker when the chunk was made) to the moment the client
  read it;
* ``mcp``: ``tools/call`` with a progress token through the official ``mcp`` client; for each
  progress notification (one per read of the run's stream), the time from the ``created_at`` of
  the last delta it carries to the moment the client's callback ran;
* ``a2a``: ``SendStreamingMessage`` through the official ``a2a-sdk`` client; the same for each
  chunk of the ``answer`` artifact.

The deltas' ``created_at`` and text come from the run's own event stream read afterwards (kept an
hour), so each notification or chunk is matched to its deltas by the text it carries. Same
machine, same clock. Figures: mean and p50/p95 ms per event, and ``*_added_ms_per_event``, the
mean minus the SSE mean of the same sitting (``*_vs_sse`` the ratio). ``measure_mcp`` and
``measure_a2a`` take a running gateway (``bench/interop.py`` folds them in); run alone, the last
line printed is one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Not bench/ itself (Python puts a script's folder first): its mcp.py would shadow the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

import httpx  # noqa: E402

CONFIG = """
[gateway]
rate_limit_per_s = 1000000.0
rate_limit_burst = 1000000
max_sse_streams_per_key = 1000
"""
RUNS = 2
MESSAGE = "long"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _figures(prefix: str, delays_ms: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_mean_ms": round(statistics.fmean(delays_ms), 3) if delays_ms else 0.0,
        f"{prefix}_p50_ms": round(_pct(delays_ms, 0.5), 3),
        f"{prefix}_p95_ms": round(_pct(delays_ms, 0.95), 3),
        f"{prefix}_events": float(len(delays_ms)),
    }


def _stamp(data: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(data["created_at"]).replace("Z", "+00:00")).timestamp()


def _deltas(url: str, key: str, session_id: str, run_id: str) -> list[tuple[float, str]]:
    """``(created_at, text)`` of the run's own text deltas, read back from its event stream."""
    out: list[tuple[float, str]] = []
    headers = {"Authorization": f"Bearer {key}"}
    path = f"{url}/v1/sessions/{session_id}/runs/{run_id}/events"
    with httpx.stream("GET", path, headers=headers, timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and '"text_delta"' in line:
                data = json.loads(line[6:])
                if data.get("run_id") == run_id:
                    out.append((_stamp(data), str(data["text"])))
    return out


def _delays(deltas: list[tuple[float, str]], received: list[tuple[float, str]]) -> list[float]:
    """Ms from the last delta each received piece carries to its receipt (pieces in order)."""
    ends: dict[int, float] = {}
    offset = 0
    for created, text in deltas:
        offset += len(text)
        ends[offset] = created
    delays, seen = [], 0
    for at, text in received:
        seen += len(text)
        if seen in ends:
            delays.append((at - ends[seen]) * 1000)
    return delays


def measure_sse(url: str, key: str, assistant: str, runs: int = RUNS) -> dict[str, float]:
    """Our own SSE: ms from each text delta's ``created_at`` to its receipt."""
    headers = {"Authorization": f"Bearer {key}"}
    delays: list[float] = []
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for _ in range(runs):
            session = client.post("/v1/sessions", json={"assistant": assistant}).json()
            body = {"text": MESSAGE, "stream": True}
            path = f"/v1/sessions/{session['session_id']}/messages"
            with client.stream("POST", path, json=body) as response:
                for line in response.iter_lines():
                    if line.startswith("data: ") and '"text_delta"' in line:
                        delays.append((time.time() - _stamp(json.loads(line[6:]))) * 1000)
    return _figures("sse", delays)


async def _mcp_runs(url: str, key: str, assistant: str, runs: int) -> list[float]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    delays: list[float] = []
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    try:
        async with (
            streamable_http_client(f"{url}/mcp", http_client=http) as streams,
            ClientSession(*streams) as session,
        ):
            await session.initialize()
            for _ in range(runs):
                received: list[tuple[float, str]] = []

                async def on_progress(
                    _p: float, _t: float | None, message: str | None, into: Any = received
                ) -> None:
                    into.append((time.time(), message or ""))

                result = await session.call_tool(
                    assistant, {"message": MESSAGE}, progress_callback=on_progress
                )
                ids = result.structured_content or {}
                deltas = await asyncio.to_thread(
                    _deltas, url, key, ids["session_id"], ids["run_id"]
                )
                delays += _delays(deltas, received)
    finally:
        await http.aclose()
    return delays


def measure_mcp(url: str, key: str, assistant: str, runs: int = RUNS) -> dict[str, float]:
    """The MCP server: ms from the last delta a progress notification carries to its receipt."""
    return _figures("mcp", asyncio.run(_mcp_runs(url, key, assistant, runs)))


async def _a2a_runs(url: str, key: str, assistant: str, runs: int) -> list[float]:
    from a2a.client import A2ACardResolver, ClientConfig, create_client
    from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

    delays: list[float] = []
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        card = await A2ACardResolver(http, f"{url}/a2a/{assistant}").get_agent_card()
        client = await create_client(card, client_config=ClientConfig(httpx_client=http))
        for _ in range(runs):
            message = Message(
                role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=MESSAGE)]
            )
            received: list[tuple[float, str]] = []
            task_id = context_id = ""
            async for event in client.send_message(SendMessageRequest(message=message)):
                at = time.time()
                if event.HasField("task"):
                    task_id, context_id = event.task.id, event.task.context_id
                if event.HasField("artifact_update"):
                    update = event.artifact_update
                    if update.artifact.name == "answer" and not update.last_chunk:
                        received.append((at, "".join(p.text for p in update.artifact.parts)))
            deltas = await asyncio.to_thread(_deltas, url, key, context_id, task_id)
            delays += _delays(deltas, received)
    return delays


def measure_a2a(url: str, key: str, assistant: str, runs: int = RUNS) -> dict[str, float]:
    """The A2A endpoint: ms from the last delta an answer chunk carries to its receipt."""
    return _figures("a2a", asyncio.run(_a2a_runs(url, key, assistant, runs)))


def _compare(figures: dict[str, float]) -> dict[str, float]:
    base = figures["sse_mean_ms"]
    for door in ("mcp", "a2a"):
        mean = figures[f"{door}_mean_ms"]
        figures[f"{door}_added_ms_per_event"] = round(mean - base, 3)
        figures[f"{door}_vs_sse"] = round(mean / base, 3) if base else 0.0
    return figures


def main() -> int:
    from tests.conftest import start_stack, stop_stack

    with tempfile.TemporaryDirectory(prefix="bench-interop-agents-") as tmp:
        home = Path(tmp)
        (home / "config.toml").write_text(CONFIG)
        stack = start_stack(home, workers=1, extra_env={"SOONG_MODEL_PROVIDER": "fake"})
        try:
            url, key = stack.gateway_url, stack.api_key
            made = httpx.post(
                f"{url}/v1/assistants",
                json={"name": "bench", "description": "the demo model"},
                headers={"Authorization": f"Bearer {key}"},
                timeout=30,
            )
            made.raise_for_status()
            figures = {
                **measure_sse(url, key, "bench"),
                **measure_mcp(url, key, "bench"),
                **measure_a2a(url, key, "bench"),
            }
        finally:
            stop_stack(stack.process)
    print(json.dumps(_compare(figures)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
