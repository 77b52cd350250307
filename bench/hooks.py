"""Hooks bench: what hooks add to one tool call, measured against a baseline in the same run.

One ``echo`` tool call goes through the real tool executor (validation, permission, run, caps)
in four variants, interleaved round by round (this machine's speed drifts; only comparisons
made in one sitting count):

- ``baseline``: the executor without hooks (``hooks=None``) — what a run gets when no hook
  applies to it: with no hook configured, ``HookSetup.bind`` returns ``None``, so this *is* the
  no-hook path;
- ``none_configured``: the same run set up end to end from an empty ``[hooks]`` section
  (``HookSetup`` → ``bind`` → ``None``), per call;
- ``other_events``: a run whose hooks are all for other events (one Stop hook): its executor
  is given no hooks (``RunHooks.on_tools`` is false), so its calls take the baseline's path;
- ``other_tool``: a PreToolUse hook whose matcher names another tool: the call does the
  hooks' lookups and runs nothing — the most a call without a hook of its own pays;
- ``one_hook``: one trivial PreToolUse hook (``/bin/true``: a real process per call, exit 0),
  its timeline event written to an in-memory store (on the bus it is one more storage command).

Printed last, one JSON line: ``hook_added_p50_ms`` (one_hook − baseline; goal ≤ 15 ms),
``no_hook_added_p50_ms`` (the larger of none_configured − baseline and other_events − baseline;
goal < 0.1 ms), ``other_tool_added_p50_ms`` (other_tool − baseline), each variant's p50, and
``rounds``. Cheap calls are timed in batches of
``BATCH`` and divided, so a figure is not the timer's resolution.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared")]

from agent_core.config import load_settings  # noqa: E402
from agent_core.ids import new_id  # noqa: E402
from agent_core.tools import (  # noqa: E402
    MemoryArtifactSink,
    PermissionGate,
    PermissionRules,
    ToolExecutor,
    ToolRegistry,
    Workspace,
)
from agent_core.types.protocol import ToolCall  # noqa: E402
from agent_core.types.runtime import RunHandle  # noqa: E402
from services.run_worker.hook_setup import HookSetup  # noqa: E402
from tests.unit.hooks.rig import EchoTool  # noqa: E402
from tests.unit.runtime.fakes import MemoryStore  # noqa: E402

ROUNDS = 5
BATCH = 500  # cheap calls per timed sample
SAMPLES = 20  # cheap samples per round
HOOK_CALLS = 40  # calls with a hook per round (each spawns a process)
SESSION = "sess_20260101_000000_abcd"


def _executor(home: Path, config: str) -> ToolExecutor:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config)
    settings = load_settings(env={"SOONG_AGENT_HOME": str(home)})
    setup = HookSetup(settings, os.environ)
    handle = RunHandle(
        run_id=new_id("run"), session_id=SESSION, agent_id=new_id("agent"), attempt=1
    )
    hooks = setup.bind(
        setup.in_effect("workspace", str(home)), MemoryStore(), handle, "main", cwd=str(home)
    )
    workspace = Workspace(home / "data", "acct_1", SESSION)
    workspace.ensure()
    return ToolExecutor(
        ToolRegistry([EchoTool()]),
        workspace=workspace,
        run_id=handle.run_id,
        agent_id=handle.agent_id,
        permissions=PermissionGate(PermissionRules()),
        artifacts=MemoryArtifactSink(),
        hooks=hooks,
    )


async def _per_call_ms(call: Callable[[], Awaitable[Any]], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        await call()
    return (time.perf_counter() - started) * 1000 / n


async def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-hooks-") as tmp:
        return await _measure(Path(tmp))


async def _measure(home: Path) -> dict[str, Any]:
    variants = {
        "baseline": _executor(home / "a", ""),
        "none_configured": None,  # set up per call below
        "other_events": _executor(home / "c", '[[hooks.Stop]]\ncommand = ["/bin/true"]\n'),
        "other_tool": _executor(
            home / "e", '[[hooks.PreToolUse]]\ncommand = ["/bin/true"]\nmatcher = "other"\n'
        ),
        "one_hook": _executor(home / "d", '[[hooks.PreToolUse]]\ncommand = ["/bin/true"]\n'),
    }
    assert variants["baseline"].hooks is None and variants["other_tool"].hooks is not None
    tool_call = ToolCall(id="call_1", name="echo", arguments={"text": "hi"})
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, executor in variants.items():
            if name == "none_configured":
                # The setup is per run, not per call: timed as the call alone on a fresh
                # executor built from the empty config (bind returned None).
                fresh = _executor(home / "b", "")
                assert fresh.hooks is None
                calls: Callable[[], Awaitable[Any]] = lambda e=fresh: e.execute(tool_call)  # noqa: E731
            else:
                assert executor is not None
                calls = lambda e=executor: e.execute(tool_call)  # noqa: E731
            if name == "one_hook":
                for _ in range(HOOK_CALLS):
                    samples[name].append(await _per_call_ms(calls, 1))
            else:
                for _ in range(SAMPLES):
                    samples[name].append(await _per_call_ms(calls, BATCH))
    p50 = {name: statistics.median(values) for name, values in samples.items()}
    no_hook = max(p50["none_configured"], p50["other_events"]) - p50["baseline"]
    return {
        "hook_added_p50_ms": round(p50["one_hook"] - p50["baseline"], 3),
        "no_hook_added_p50_ms": round(no_hook, 4),
        "baseline_p50_ms": round(p50["baseline"], 4),
        "none_configured_p50_ms": round(p50["none_configured"], 4),
        "other_events_p50_ms": round(p50["other_events"], 4),
        "other_tool_added_p50_ms": round(p50["other_tool"] - p50["baseline"], 4),
        "other_tool_p50_ms": round(p50["other_tool"], 4),
        "one_hook_p50_ms": round(p50["one_hook"], 3),
        "rounds": ROUNDS,
    }


if __name__ == "__main__":
    try:
        import uvloop  # the workers' event loop

        result = uvloop.run(main())
    except ImportError:
        result = asyncio.run(main())
    print(json.dumps(result))
