"""Running the hooks of one event and folding what they decide into one :class:`Verdict`.

Hooks of an event run one after another in the order they are in effect (the operator's, then
the project's; file order within each). Each sees the input as the hooks before it left it: a
PreToolUse hook sees the arguments an earlier hook rewrote. The first hook that blocks ends the
event's run for a gate (PreToolUse, PostToolUse, PostToolUseFailure, UserPromptSubmit, Stop);
the hooks of a notification (SessionStart, SubagentStop, PreCompact, RunEnd) all run, and
nothing they answer changes the run.

Each event takes only some of a hook's answer (:data:`ACCEPTS`); an answer with anything else is
invalid output, a failure like a timeout: the hook's ``on_error`` decides. Every execution is
handed to the recorder as a :class:`HookRecord` — the hook, what came of it, how long it took
and a SHA-256 of its input, never the input itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agent_core.config.hooks import AgentKind, Hook
from agent_core.errors import redact
from agent_core.hooks.runner import HookRun, run_hook
from agent_core.types.enums import HookDecision, HookPhase
from agent_core.types.protocol import HookInput, HookOutput

__all__ = [
    "ACCEPTS",
    "GATES",
    "HookRecord",
    "HookSet",
    "Recorder",
    "Validator",
    "Verdict",
    "run_event",
]

_REASON_CHARS: Final = 2000


@dataclass(frozen=True, slots=True)
class _Accepts:
    decisions: frozenset[HookDecision]
    context: bool = False
    rewrite: bool = False


_ALLOW = frozenset({HookDecision.ALLOW})
_ALLOW_DENY = frozenset({HookDecision.ALLOW, HookDecision.DENY})
# What each event takes of a hook's answer (``reason`` and ``metadata``: every event).
ACCEPTS: Final[dict[HookPhase, _Accepts]] = {
    HookPhase.PRE_TOOL_USE: _Accepts(frozenset(HookDecision), rewrite=True),
    HookPhase.POST_TOOL_USE: _Accepts(_ALLOW_DENY, context=True),
    HookPhase.POST_TOOL_USE_FAILURE: _Accepts(_ALLOW_DENY, context=True),
    HookPhase.USER_PROMPT_SUBMIT: _Accepts(_ALLOW_DENY, context=True),
    HookPhase.STOP: _Accepts(_ALLOW_DENY),
    HookPhase.SESSION_START: _Accepts(_ALLOW),
    HookPhase.SUBAGENT_STOP: _Accepts(_ALLOW),
    HookPhase.PRE_COMPACT: _Accepts(_ALLOW),
    HookPhase.RUN_END: _Accepts(_ALLOW),
}
# Events whose hooks can stop something; the others are notifications.
GATES: Final = frozenset(
    {
        HookPhase.PRE_TOOL_USE,
        HookPhase.POST_TOOL_USE,
        HookPhase.POST_TOOL_USE_FAILURE,
        HookPhase.USER_PROMPT_SUBMIT,
        HookPhase.STOP,
    }
)

# The tool's schema check of rewritten arguments: ``None`` when they fit, else why not.
Validator = Callable[[dict[str, Any]], str | None]


@dataclass(frozen=True, slots=True)
class HookRecord:
    """One hook execution as the timeline keeps it (``hook_executed``)."""

    hook: str
    event: str
    source: str
    outcome: str  # the runner's: ok, exit_2, exit_code, timeout, not_started, invalid_output, …
    decision: str  # what came of it: allow, deny, ask, rewrite, block, continue
    reason: str | None
    duration_ms: float
    input_sha256: str
    exit_code: int | None = None

    def payload(self) -> dict[str, Any]:
        """The event's payload."""
        return {
            "hook": self.hook,
            "event": self.event,
            "source": self.source,
            "outcome": self.outcome,
            "decision": self.decision,
            "reason": self.reason,
            "duration_ms": self.duration_ms,
            "input_sha256": self.input_sha256,
            "exit_code": self.exit_code,
        }


Recorder = Callable[[HookRecord, str | None], Awaitable[None]]


@dataclass
class Verdict:
    """What the hooks of one event decided together.

    ``decision``: ``deny`` (one blocked: exit 2, a deny, or a failure with ``on_error = block``),
    else ``ask`` (one asked), else ``None``; ``reason`` and ``hook`` name why and who.
    ``context``: texts hooks added, with their names. ``arguments``: the tool input as the last
    hook that rewrote it left it (already checked against the tool's schema)."""

    decision: HookDecision | None = None
    reason: str | None = None
    hook: str | None = None
    context: list[tuple[str, str]] = field(default_factory=list)
    arguments: dict[str, Any] | None = None

    @property
    def blocked(self) -> bool:
        """Whether a hook blocked."""
        return self.decision is HookDecision.DENY


class HookSet:
    """The hooks in effect for a run, by event; cheap to ask whether an event has any."""

    def __init__(self, hooks: Iterable[Hook]) -> None:
        self.hooks: tuple[Hook, ...] = tuple(hooks)
        by_phase: dict[HookPhase, list[Hook]] = {}
        for hook in self.hooks:
            by_phase.setdefault(hook.phase, []).append(hook)
        self._by_phase = {phase: tuple(hooks) for phase, hooks in by_phase.items()}

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def for_agent(self, agent: AgentKind) -> dict[HookPhase, tuple[Hook, ...]]:
        """The hooks that run for agents of kind ``agent``, by event (events without any left
        out, so a lookup that misses is the whole cost of an event nobody hooks)."""
        kept = {
            phase: tuple(h for h in hooks if h.matches(None, agent))
            for phase, hooks in self._by_phase.items()
        }
        return {phase: hooks for phase, hooks in kept.items() if hooks}


def _why(reason: str | None) -> str:
    text = redact((reason or "").strip())
    return text[:_REASON_CHARS] if text else "no reason given"


def _misfit(phase: HookPhase, output: HookOutput, validate: Validator | None) -> str | None:
    """Why ``output`` does not fit ``phase`` (see :data:`ACCEPTS`), or ``None``."""
    accepts = ACCEPTS[phase]
    if output.decision is not None and output.decision not in accepts.decisions:
        return f"decision {output.decision.value!r} is not one this event takes"
    if output.additional_context is not None and not accepts.context:
        return "additional_context is not something this event takes"
    if output.updated_arguments is not None:
        if not accepts.rewrite:
            return "updated_arguments is not something this event takes"
        problem = validate(output.updated_arguments) if validate is not None else None
        if problem is not None:
            return f"updated_arguments do not fit the tool's schema: {problem}"
    return None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def run_event(
    hooks: Iterable[Hook],
    hook_input: HookInput,
    *,
    env: Mapping[str, str],
    record: Recorder,
    cwd: str | None = None,
    validate: Validator | None = None,
    tool_call_id: str | None = None,
) -> Verdict:
    """Run ``hooks`` (already matched) for one event and fold what they decide (see the module
    docstring); each execution is recorded before the next hook starts."""
    phase = hook_input.phase
    gate = phase in GATES
    verdict = Verdict()
    for hook in hooks:
        data = hook_input.model_dump_json().encode()
        run = await run_hook(
            hook.spec.argv(), data, timeout_s=hook.spec.timeout_s, env=env, cwd=cwd
        )
        decision, reason, output = _interpret(hook, run, phase, validate)
        await record(
            HookRecord(
                hook=hook.name,
                event=hook.event,
                source=hook.source,
                outcome=run.outcome,
                decision=decision,
                reason=reason,
                duration_ms=run.duration_ms,
                input_sha256=_digest(data),
                exit_code=run.exit_code,
            ),
            tool_call_id,
        )
        if not gate:
            continue
        if decision in ("deny", "block"):
            verdict.decision, verdict.reason, verdict.hook = HookDecision.DENY, reason, hook.name
            return verdict
        if output is None:
            continue
        if output.decision is HookDecision.ASK and verdict.decision is None:
            verdict.decision, verdict.reason, verdict.hook = HookDecision.ASK, reason, hook.name
        if output.additional_context:
            verdict.context.append((hook.name, output.additional_context))
        if output.updated_arguments is not None and hook_input.tool_call is not None:
            verdict.arguments = output.updated_arguments
            call = hook_input.tool_call.model_copy(update={"arguments": output.updated_arguments})
            hook_input = hook_input.model_copy(update={"tool_call": call})
    return verdict


def _interpret(
    hook: Hook, run: HookRun, phase: HookPhase, validate: Validator | None
) -> tuple[str, str | None, HookOutput | None]:
    """What one execution amounts to: its decision word, its reason, its usable answer."""
    if run.outcome == "exit_2":
        return "block", _why(run.stderr), None
    failure = run.detail if run.failed else None
    output = run.output
    if output is not None:
        failure = _misfit(phase, output, validate)
    if failure is not None:
        if hook.on_error == "block":
            return "block", f"hook {hook.name} failed ({failure}); its on_error is block", None
        return "continue", f"hook {hook.name} failed ({failure}); ignored (on_error continue)", None
    assert output is not None
    if output.decision is HookDecision.DENY:
        return "deny", _why(output.reason), output
    if output.decision is HookDecision.ASK:
        return "ask", _why(output.reason), output
    if output.updated_arguments is not None:
        return "rewrite", None, output
    return "allow", None, output
