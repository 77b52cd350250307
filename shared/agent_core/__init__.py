"""soong-agent core library."""

import sys as _sys

# redis-py (8.x) imports the OpenTelemetry *metrics* SDK at import time whenever it is installed,
# to offer instrumentation of its own that soong-agent does not use; our traces need only the
# trace SDK. That import costs every process ~0.8 s of CPU at start-up, so the module is marked
# absent before anything imports redis (redis-py then runs without its instrumentation, as it
# does when the SDK is not installed). Nothing of ours imports the metrics SDK.
_sys.modules.setdefault("opentelemetry.sdk.metrics", None)  # type: ignore[arg-type]
