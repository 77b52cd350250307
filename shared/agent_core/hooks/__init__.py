"""Command hooks: what operators and trusted projects run at points of every agent's run.

``config`` (the ``[hooks]`` section and project ``hooks.toml`` entries), ``runner`` (one hook
execution: argv, JSON over stdin/stdout, timeout, exit codes), ``pipeline`` (the hooks of one
event, folded into one verdict), ``run`` (a run's hooks, what the loop and tool executor call),
``effective`` (which hooks are in effect for a session). See README, "Hooks".
"""

from agent_core.config.hooks import (
    AGENT_KINDS,
    DEFAULT_ON_ERROR,
    EVENT_NAMES,
    AgentKind,
    Hook,
    HookEntries,
    HookSpec,
    HooksSettings,
    hooks_of,
)
from agent_core.hooks.effective import PROJECT_FILE, HookInfo, HookList, HooksInEffect, describe
from agent_core.hooks.pipeline import HookRecord, HookSet, Verdict, run_event
from agent_core.hooks.run import RunHooks
from agent_core.hooks.runner import MAX_STDERR, MAX_STDOUT, HookRun, run_hook

__all__ = [
    "AGENT_KINDS",
    "DEFAULT_ON_ERROR",
    "EVENT_NAMES",
    "MAX_STDERR",
    "MAX_STDOUT",
    "PROJECT_FILE",
    "AgentKind",
    "Hook",
    "HookEntries",
    "HookInfo",
    "HookList",
    "HookRecord",
    "HookRun",
    "HookSet",
    "HookSpec",
    "HooksInEffect",
    "HooksSettings",
    "RunHooks",
    "Verdict",
    "describe",
    "hooks_of",
    "run_event",
    "run_hook",
]
