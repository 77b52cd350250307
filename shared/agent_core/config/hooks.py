"""How hooks are configured: the ``[hooks]`` section of config.toml and a project's
``.soong-agent/hooks.toml``, and the :class:`Hook` each entry becomes.

An entry names its event by the table it sits in (``[[hooks.PreToolUse]]`` in config.toml,
``[[PreToolUse]]`` in a project file) and says what to run::

    [[hooks.PreToolUse]]
    name = "no-secrets"              # optional; shown in events and the API
    matcher = "write_file|run_*"     # tool events only: tool names, ``*`` and ``?`` globs
    command = ["/opt/hooks/guard", "--strict"]   # argv, run without a shell
    timeout_s = 10
    on_error = "block"               # or "continue"; the default depends on the event
    agents = ["main", "sub"]         # optional: which kinds of agent (default: every kind)

``command`` may be a string only with ``shell = true`` (it then runs as ``/bin/sh -c``). Every
problem is refused when the file is read, never when the hook first runs.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_core.types.enums import HookPhase

__all__ = [
    "AGENT_ALIASES",
    "AGENT_KINDS",
    "DEFAULT_ON_ERROR",
    "EVENT_NAMES",
    "SHELL",
    "TOOL_EVENTS",
    "AgentKind",
    "Hook",
    "HookEntries",
    "HookSpec",
    "HooksSettings",
    "OnError",
    "hooks_of",
]

# The agents API's own words (``AgentType``): a worker sub-agent is ``sub``.
AgentKind = Literal["main", "orchestrator", "sub", "fork"]
AGENT_KINDS: Final[tuple[AgentKind, ...]] = ("main", "orchestrator", "sub", "fork")
# Deprecated spellings still read in ``agents``: ``worker`` was this file's word for ``sub``
# before the two names were made one.
AGENT_ALIASES: Final[dict[str, AgentKind]] = {"worker": "sub"}
OnError = Literal["block", "continue"]
SHELL: Final = "/bin/sh"

# Config name → phase. The names are the tables of the config files.
EVENT_NAMES: Final[dict[str, HookPhase]] = {
    "SessionStart": HookPhase.SESSION_START,
    "UserPromptSubmit": HookPhase.USER_PROMPT_SUBMIT,
    "PreToolUse": HookPhase.PRE_TOOL_USE,
    "PostToolUse": HookPhase.POST_TOOL_USE,
    "PostToolUseFailure": HookPhase.POST_TOOL_USE_FAILURE,
    "Stop": HookPhase.STOP,
    "SubagentStop": HookPhase.SUBAGENT_STOP,
    "PreCompact": HookPhase.PRE_COMPACT,
    "RunEnd": HookPhase.RUN_END,
}
TOOL_EVENTS: Final = frozenset(
    {HookPhase.PRE_TOOL_USE, HookPhase.POST_TOOL_USE, HookPhase.POST_TOOL_USE_FAILURE}
)
# A hook that fails (another exit code, a timeout, a missing binary, bad output) blocks what it
# guards by default where it is a gate — a guard that fails must not fail open — and is only
# recorded where a block would keep a run going or withhold what already happened.
DEFAULT_ON_ERROR: Final[dict[HookPhase, OnError]] = {
    phase: "block"
    if phase in (HookPhase.PRE_TOOL_USE, HookPhase.USER_PROMPT_SUBMIT)
    else "continue"
    for phase in HookPhase
}

_MATCHER_PART = re.compile(r"^[A-Za-z0-9_\-*?]{1,128}$")
_MAX_MATCHER_PARTS = 32


class HookSpec(BaseModel):
    """One configured hook (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    matcher: str | None = Field(default=None, max_length=2048)
    command: tuple[str, ...] | str
    shell: bool = False
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    on_error: OnError | None = None
    agents: tuple[AgentKind, ...] | None = None

    @field_validator("agents", mode="before")
    @classmethod
    def _aliases(cls, value: object) -> object:
        """``worker`` (deprecated) reads as ``sub``; anything else is validated as given."""
        if isinstance(value, list | tuple):
            return tuple(AGENT_ALIASES.get(v, v) if isinstance(v, str) else v for v in value)
        return value

    @model_validator(mode="after")
    def _check(self) -> HookSpec:
        if isinstance(self.command, str):
            if not self.shell:
                raise ValueError(
                    "command is a string: give an argv list, or set shell = true to run it "
                    "through /bin/sh"
                )
            if not self.command.strip() or "\x00" in self.command:
                raise ValueError("command is empty or holds a NUL character")
        else:
            if self.shell:
                raise ValueError("shell = true takes a command string, not an argv list")
            if not self.command or not self.command[0]:
                raise ValueError("command is an empty argv list")
            if any("\x00" in part for part in self.command):
                raise ValueError("command holds a NUL character")
        if self.matcher is not None:
            parts = self.matcher.split("|")
            if len(parts) > _MAX_MATCHER_PARTS or not all(_MATCHER_PART.match(p) for p in parts):
                raise ValueError(
                    f"matcher {self.matcher[:80]!r}: tool names separated by '|', each of "
                    "letters, digits, '_', '-' and the globs '*' and '?'"
                )
        if self.agents is not None and not self.agents:
            raise ValueError("agents is empty: leave it out to run the hook for every agent")
        return self

    def argv(self) -> tuple[str, ...]:
        """What is executed: the argv list as given, or ``/bin/sh -c <command>``."""
        if isinstance(self.command, str):
            return (SHELL, "-c", self.command)
        return self.command


class HookEntries(BaseModel):
    """The hooks of one file, by event (a project's ``hooks.toml`` is exactly this)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    SessionStart: tuple[HookSpec, ...] = ()
    UserPromptSubmit: tuple[HookSpec, ...] = ()
    PreToolUse: tuple[HookSpec, ...] = ()
    PostToolUse: tuple[HookSpec, ...] = ()
    PostToolUseFailure: tuple[HookSpec, ...] = ()
    Stop: tuple[HookSpec, ...] = ()
    SubagentStop: tuple[HookSpec, ...] = ()
    PreCompact: tuple[HookSpec, ...] = ()
    RunEnd: tuple[HookSpec, ...] = ()

    @model_validator(mode="after")
    def _matchers(self) -> HookEntries:
        for event, phase in EVENT_NAMES.items():
            for i, spec in enumerate(getattr(self, event)):
                if spec.matcher is not None and phase not in TOOL_EVENTS:
                    raise ValueError(
                        f"{event}[{i}]: matcher applies to tool events only "
                        "(PreToolUse, PostToolUse, PostToolUseFailure)"
                    )
        return self

    def is_empty(self) -> bool:
        """Whether no event has a hook."""
        return not any(getattr(self, event) for event in EVENT_NAMES)


class HooksSettings(HookEntries):
    """``[hooks]`` of config.toml: the operator's hooks, and where project files are read.

    ``trusted_project_roots``: a session's ``<project>/.soong-agent/hooks.toml`` is read only
    when its project folder lies at or below one of these absolute folders (default: none — no
    project file is ever read). A session working in its own workspace has no project file.
    """

    trusted_project_roots: tuple[Path, ...] = ()

    @model_validator(mode="after")
    def _roots(self) -> HooksSettings:
        for root in self.trusted_project_roots:
            if not root.is_absolute():
                raise ValueError(f"trusted_project_roots: {root} is not an absolute path")
        return self


@dataclass(frozen=True, slots=True)
class Hook:
    """A hook in effect: its spec, event, where it was defined and its resolved settings."""

    name: str
    phase: HookPhase
    event: str  # the config name, ``PreToolUse``
    spec: HookSpec
    source: Literal["operator", "project"]
    on_error: OnError

    def matches(self, tool: str | None, agent: AgentKind) -> bool:
        """Whether the hook runs for a call of ``tool`` (``None``: not a tool event) made by an
        agent of kind ``agent``."""
        if self.spec.agents is not None and agent not in self.spec.agents:
            return False
        matcher = self.spec.matcher
        if matcher is None or tool is None:
            return True
        # Globs over a tool name (≤ 128 characters): bounded work.
        return any(fnmatch.fnmatchcase(tool, part) for part in matcher.split("|"))


def hooks_of(entries: HookEntries, source: Literal["operator", "project"]) -> list[Hook]:
    """The hooks ``entries`` define, in file order per event; unnamed ones are named by their
    source, event and position (``operator:PreToolUse[0]``)."""
    hooks = []
    for event, phase in EVENT_NAMES.items():
        for i, spec in enumerate(getattr(entries, event)):
            hooks.append(
                Hook(
                    name=spec.name or f"{source}:{event}[{i}]",
                    phase=phase,
                    event=event,
                    spec=spec,
                    source=source,
                    on_error=spec.on_error or DEFAULT_ON_ERROR[phase],
                )
            )
    return hooks
