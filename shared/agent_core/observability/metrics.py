"""Every metric of soong-agent, declared once, in the Prometheus client's process registry.

Each service process exposes the registry on its ops port (``/metrics``; the gateway too, never on
its public API port). A figure is counted by the one process that knows it: a run's end by the service that ends
it, a model call by the worker that made it, a batch by the writer that committed it. Summing a
counter over every scraped process therefore counts each event once.

Labels are bounded sets (statuses, end reasons, providers and models from configuration, tool
names from the registry, stream names from the bus): no id ever becomes a label.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client import (
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from redis.asyncio import Redis
from redis.exceptions import RedisError

__all__ = [
    "BUS_PENDING",
    "DEAD_LETTERS",
    "GATEWAY_REQUESTS",
    "GATEWAY_REQUEST_SECONDS",
    "MCP_SERVER_CRASHES",
    "MCP_SERVER_STARTS",
    "MODEL_CALLS",
    "MODEL_LATENCY",
    "MODEL_TTFT",
    "RUNS_ENDED",
    "RUNS_STARTED",
    "RUNS_SUBMITTED",
    "RUN_DURATION",
    "SSE_STREAMS_OPEN",
    "TOKENS",
    "TOOL_CALLS",
    "TOOL_SECONDS",
    "WRITER_BATCH_COMMANDS",
    "WRITER_COMMIT_SECONDS",
    "observe_pending",
    "render_metrics",
]

# ``*_created`` samples double the output and no dashboard of ours reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]

_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SLOW = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)

RUNS_SUBMITTED = Counter("soong_runs_submitted", "Runs queued through this gateway.")
RUNS_STARTED = Counter("soong_runs_started", "Run attempts started by this worker.", ["kind"])
RUNS_ENDED = Counter(
    "soong_runs_ended",
    "Runs ended, by terminal status and end reason, counted where the run ends.",
    ["status", "end_reason"],
)
RUN_DURATION = Histogram(
    "soong_run_duration_seconds", "Wall-clock time of ended runs.", ["status"], buckets=_SLOW
)
MODEL_CALLS = Counter(
    "soong_model_calls",
    "Model calls by provider, model and outcome.",
    ["provider", "model", "outcome"],
)
MODEL_LATENCY = Histogram(
    "soong_model_call_seconds",
    "Model call duration, request to last event.",
    ["provider", "model"],
    buckets=_SLOW,
)
MODEL_TTFT = Histogram(
    "soong_model_time_to_first_token_seconds",
    "Model call, request to first streamed event.",
    ["provider", "model"],
    buckets=_FAST + (30.0, 60.0),
)
TOKENS = Counter(
    "soong_model_tokens",
    "Tokens by provider, model and direction (in, out).",
    ["provider", "model", "direction"],
)
TOOL_CALLS = Counter(
    "soong_tool_calls", "Tool calls by tool and outcome (ok, error).", ["tool", "outcome"]
)
TOOL_SECONDS = Histogram(
    "soong_tool_call_seconds", "Tool call duration by tool.", ["tool"], buckets=_SLOW
)
BUS_PENDING = Gauge(
    "soong_bus_pending",
    "Entries delivered to this process and not yet acknowledged, by stream (read at scrape).",
    ["stream", "group"],
)
DEAD_LETTERS = Counter(
    "soong_bus_dead_letters",
    "Entries this process moved to the dead-letter stream.",
    ["stream", "reason"],
)
WRITER_BATCH_COMMANDS = Histogram(
    "soong_writer_batch_commands",
    "Storage commands per committed batch.",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
)
WRITER_COMMIT_SECONDS = Histogram(
    "soong_writer_commit_seconds",
    "Time to apply and commit one batch of storage commands.",
    buckets=_FAST,
)
SSE_STREAMS_OPEN = Gauge("soong_sse_streams_open", "Event streams open on this gateway.")
GATEWAY_REQUESTS = Counter(
    "soong_gateway_requests",
    "HTTP requests by method, route template and status.",
    ["method", "route", "status"],
)
GATEWAY_REQUEST_SECONDS = Histogram(
    "soong_gateway_request_duration_seconds",
    "HTTP request latency by route template.",
    ["route"],
    buckets=_FAST,
)
# MCP servers (agent_core/mcp): starts by server (from configuration) and outcome, and the
# connections that ended by themselves (a crash, a server gone away).
MCP_SERVER_STARTS = Counter(
    "soong_mcp_server_starts",
    "MCP server starts by server and outcome (ok, failed).",
    ["server", "outcome"],
)
MCP_SERVER_CRASHES = Counter(
    "soong_mcp_server_crashes", "MCP server connections lost while in use, by server.", ["server"]
)


class Consumed(Protocol):
    """A consumer as far as its lag goes."""

    stream: str
    group: str
    consumer: str


def render_metrics() -> bytes:
    """The process registry in the Prometheus text format."""
    return generate_latest(REGISTRY)


async def observe_pending(redis: Redis, consumers: Iterable[Consumed]) -> None:
    """Set :data:`BUS_PENDING` from ``XPENDING`` (at scrape): the entries delivered to *this*
    process's consumer and not yet acknowledged, so summing over instances gives the group's."""
    for consumer in consumers:
        try:
            summary = await redis.xpending(consumer.stream, consumer.group)
        except RedisError:  # no such stream or group yet: nothing is pending
            summary = {}
        mine = 0
        for row in summary.get("consumers") or () if isinstance(summary, dict) else ():
            name = row.get("name")
            if (name.decode() if isinstance(name, bytes) else name) == consumer.consumer:
                mine = int(row.get("pending", 0))
        BUS_PENDING.labels(consumer.stream, consumer.group).set(mine)
