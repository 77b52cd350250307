"""The hooks of each run a worker executes: the same for every kind of agent.

One :class:`HookSetup` per worker process holds the operator's hooks and reads trusted project
files (``agent_core.hooks.HooksInEffect``). Per attempt, :meth:`HookSetup.in_effect` gives the
session's hooks (raising ``invalid_hooks`` for a project file that cannot be used — the run then
fails, a broken guard never quietly stops guarding); :meth:`HookSetup.bind` gives one run's
:class:`RunHooks` — the main or orchestrator run's and, through the child runner, each worker's
and fork's, with its kind — or ``None`` when no hook applies, so a run without hooks costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from agent_core.config import Settings
from agent_core.hooks import AgentKind, HookSet, HooksInEffect, RunHooks
from agent_core.hooks.run import EventWriter
from agent_core.tools.projects import WORKSPACE_PROJECT
from agent_core.types.runtime import RunHandle

__all__ = ["HOOK_ENV", "HookSetup"]

# What a hook's environment holds of the worker's: never the provider key, the Redis URL or
# any other setting — a hook that needs more reads it from its own files.
HOOK_ENV: Final = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")


class HookSetup:
    """Hooks in effect and bound per run (see the module docstring)."""

    def __init__(self, settings: Settings, environ: Mapping[str, str]) -> None:
        self.effective = HooksInEffect(settings.hooks)
        self.env = {k: environ[k] for k in HOOK_ENV if k in environ}
        self.env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")

    def in_effect(self, cwd: str, project: str) -> HookSet:
        """The hooks of a session naming project ``cwd`` whose folder is ``project`` (``""``:
        unusable). Raises ``ConfigError`` (``invalid_hooks``) for a bad project file."""
        own = None if cwd in ("", WORKSPACE_PROJECT) or not project else Path(project)
        return self.effective.for_project(own)

    def bind(
        self,
        hooks: HookSet,
        events: EventWriter,
        handle: RunHandle,
        agent: AgentKind,
        *,
        cwd: str,
        parent_run_id: str | None = None,
    ) -> RunHooks | None:
        """One run's hooks, or ``None`` when none applies to an agent of kind ``agent``."""
        return RunHooks.bind(
            hooks,
            handle=handle,
            agent=agent,
            events=events,
            env=self.env,
            cwd=cwd or None,
            parent_run_id=parent_run_id,
        )
