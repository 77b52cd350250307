"""A child that cannot start with its configuration stops the stack instead of restarting."""

from __future__ import annotations

import asyncio
import sys

from agent_core.service.runner import EXIT_CONFIG
from agent_core.service.supervisor import ChildSpec, Supervisor


async def test_a_child_exiting_with_a_config_error_stops_every_child() -> None:
    bad = ChildSpec("run_worker.0", [sys.executable, "-c", f"raise SystemExit({EXIT_CONFIG})"])
    good = ChildSpec("gateway", [sys.executable, "-c", "import time; time.sleep(3600)"])
    supervisor = Supervisor([bad, good], stop_timeout_s=5)
    # Not restarted, not waiting for the sleeper (an hour): a wait would end in TimeoutError.
    async with asyncio.timeout(60):
        await supervisor.run()
    assert supervisor.config_error == "run_worker.0"
