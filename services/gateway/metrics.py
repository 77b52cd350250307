"""``/metrics`` in the Prometheus text format, hand-rolled (no client library needed).

Per gateway instance: requests by route template and status, a latency histogram per route,
open SSE streams, runs submitted, and runs by terminal status as seen in the ``run_finished``
events this instance served (each run counted once). Bus lag is read from Redis at scrape time:
the pending (delivered, unacknowledged) entries and the length of each work stream.
"""

from __future__ import annotations

import time
from collections import OrderedDict, defaultdict
from typing import Any

from redis.asyncio import Redis
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_core.bus import GROUP_RUN_WORKERS, GROUP_STORAGE, BusNames

__all__ = ["Metrics", "MetricsMiddleware"]

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SEEN_RUNS = 10_000


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Counters of one gateway instance."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.latency: dict[str, list[int]] = {}
        self.latency_sum: dict[str, float] = defaultdict(float)
        self.runs_finished: dict[str, int] = defaultdict(int)
        self.runs_submitted = 0
        self.sse_open = 0
        self._seen: OrderedDict[str, None] = OrderedDict()

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one finished request."""
        self.requests[(method, route, status)] += 1
        counts = self.latency.setdefault(route, [0] * (len(_BUCKETS) + 1))
        for i, bound in enumerate(_BUCKETS):
            if seconds <= bound:
                counts[i] += 1
        counts[-1] += 1
        self.latency_sum[route] += seconds

    def run_finished(self, run_id: str, status: str) -> None:
        """Count a run's terminal status once, however many clients watched it end."""
        if run_id in self._seen:
            return
        self._seen[run_id] = None
        if len(self._seen) > _SEEN_RUNS:
            self._seen.popitem(last=False)
        self.runs_finished[status] += 1

    async def render(self, redis: Redis, names: BusNames) -> str:
        """The exposition text, with bus lag read now."""
        out: list[str] = []
        out += ["# HELP soong_gateway_requests_total HTTP requests by route and status."]
        out += ["# TYPE soong_gateway_requests_total counter"]
        for (method, route, status), n in sorted(self.requests.items()):
            out.append(
                f'soong_gateway_requests_total{{method="{method}",route="{_label(route)}",'
                f'status="{status}"}} {n}'
            )
        out += ["# HELP soong_gateway_request_duration_seconds Request latency by route."]
        out += ["# TYPE soong_gateway_request_duration_seconds histogram"]
        for route, counts in sorted(self.latency.items()):
            r = _label(route)
            for bound, n in zip(_BUCKETS, counts, strict=False):
                out.append(
                    f'soong_gateway_request_duration_seconds_bucket{{route="{r}",le="{bound}"}} {n}'
                )
            out.append(
                f'soong_gateway_request_duration_seconds_bucket{{route="{r}",le="+Inf"}} {counts[-1]}'
            )
            out.append(
                f'soong_gateway_request_duration_seconds_sum{{route="{r}"}} '
                f"{self.latency_sum[route]:.6f}"
            )
            out.append(f'soong_gateway_request_duration_seconds_count{{route="{r}"}} {counts[-1]}')
        out += ["# HELP soong_runs_submitted_total Runs submitted through this gateway."]
        out += [
            "# TYPE soong_runs_submitted_total counter",
            f"soong_runs_submitted_total {self.runs_submitted}",
        ]
        out += [
            "# HELP soong_runs_finished_total Runs by terminal status, as seen in served streams."
        ]
        out += ["# TYPE soong_runs_finished_total counter"]
        for run_status, n in sorted(self.runs_finished.items()):
            out.append(f'soong_runs_finished_total{{status="{_label(run_status)}"}} {n}')
        out += ["# HELP soong_sse_streams_open Event streams open on this gateway."]
        out += ["# TYPE soong_sse_streams_open gauge", f"soong_sse_streams_open {self.sse_open}"]
        out += await _bus_lag(redis, names)
        return "\n".join(out) + "\n"


async def _bus_lag(redis: Redis, names: BusNames) -> list[str]:
    streams = (
        (names.runs, GROUP_RUN_WORKERS),
        (names.storage_commands(), GROUP_STORAGE),
        (names.storage_queries, GROUP_STORAGE),
    )
    pending: list[str] = []
    length: list[str] = []
    for stream, group in streams:
        count: Any = 0
        try:
            summary = await redis.xpending(stream, group)
            count = summary.get("pending", 0) if isinstance(summary, dict) else 0
        except Exception:  # the stream or group does not exist yet: nothing pending
            count = 0
        size = await redis.xlen(stream)
        s, g = _label(stream), _label(group)
        pending.append(f'soong_bus_pending{{stream="{s}",group="{g}"}} {int(count)}')
        length.append(f'soong_bus_stream_length{{stream="{s}"}} {int(size)}')
    return [
        "# HELP soong_bus_pending Delivered but unacknowledged entries (consumer lag).",
        "# TYPE soong_bus_pending gauge",
        *pending,
        "# HELP soong_bus_stream_length Entries held in each work stream.",
        "# TYPE soong_bus_stream_length gauge",
        *length,
    ]


class MetricsMiddleware:
    """Times every HTTP request and counts it under its route template (never the raw path)."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def tracked(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "<unmatched>"
            self.metrics.observe(scope["method"], template, status, time.perf_counter() - started)
