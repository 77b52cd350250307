"""Tracing is off unless an OTLP endpoint is configured: no SDK, no exporter, no recorded span —
nothing can leave the machine — yet a ``traceparent`` that arrives is passed on unchanged."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

# In a fresh interpreter: the tracer provider is process-global, and the point is what a
# process that was never configured imports (the trace SDK and any exporter; redis-py itself
# looks for the metrics SDK, which exports nothing unless set up).
_PROBE = """
import json, sys
from agent_core.config import load_settings
from agent_core.observability.tracing import context_from, attach_context, setup_tracing
from agent_core.observability.tracing import trace_headers, tracer

settings = load_settings(env={"SOONG_AGENT_HOME": sys.argv[1]})
shutdown = setup_tracing(settings.observability, "run_worker", "0")
with tracer().start_as_current_span("run") as span:
    recording = span.is_recording()
    own = trace_headers()
incoming = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
with attach_context(context_from(incoming)), tracer().start_as_current_span("child"):
    passed_on = trace_headers()
print(json.dumps({
    "endpoint": settings.observability.otlp_endpoint,
    "shutdown": shutdown is not None,
    "recording": recording,
    "own": own,
    "passed_on": passed_on,
    "sdk_loaded": sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk.trace")),
    "exporter_loaded": sorted(m for m in sys.modules if m.startswith("opentelemetry.exporter")),
}))
"""


def test_nothing_is_recorded_or_exported_without_an_endpoint(tmp_path: object) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{REPO}:{REPO / 'shared'}"},
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["endpoint"] is None and seen["shutdown"] is False
    assert seen["recording"] is False and seen["own"] == {}
    assert seen["sdk_loaded"] == [] and seen["exporter_loaded"] == []
    assert seen["passed_on"]["traceparent"].split("-")[1] == "0af7651916cd43dd8448eb211c80319c"
