"""Where agent code runs: a bubblewrap sandbox per call, its limits, and how a worker sets it up.

``docs/architecture.md``, "Walls: sandbox, secrets, paths, bounded input" describes what a call
sees and what bounds it; :mod:`.runners` holds the sandbox itself, :mod:`.staging` how a root
worker's areas reach it, :mod:`.process` the limits the worker watches (wall clock, write quota,
the kill of the whole tree), :mod:`.setup` the start-up decision.
"""

from agent_core.tools.sandbox.limits import CappedBuffer, SandboxLimits
from agent_core.tools.sandbox.process import SandboxResult, StopReason, WriteWatch, run_limited
from agent_core.tools.sandbox.runners import (
    SANDBOX_UID,
    SANDBOX_WORKSPACE,
    BwrapRunner,
    CodeRunner,
    DirectRunner,
    SandboxConfig,
)

__all__ = [
    "SANDBOX_UID",
    "SANDBOX_WORKSPACE",
    "BwrapRunner",
    "CappedBuffer",
    "CodeRunner",
    "DirectRunner",
    "SandboxConfig",
    "SandboxLimits",
    "SandboxResult",
    "StopReason",
    "WriteWatch",
    "run_limited",
]
