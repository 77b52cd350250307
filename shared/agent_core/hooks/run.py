"""The hooks of one run, bound to the agent that runs it: what the loop and the tool executor call.

One :class:`RunHooks` per run (main, orchestrator, worker and fork alike: the run-worker builds
it the same way for each, with the agent's kind), or ``None`` when no hook applies to the run —
then the loop and the executor do nothing but that ``None`` check. Each method runs the matching
hooks of its event through :func:`agent_core.hooks.pipeline.run_event` and writes every execution
to the run's timeline (``hook_executed``). A method whose event has no hook for this agent
returns after one dict lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from agent_core.config.hooks import AgentKind, Hook
from agent_core.errors import AgentCoreError
from agent_core.hooks.pipeline import HookRecord, HookSet, Validator, Verdict, run_event
from agent_core.types.enums import EventLevel, EventType, HookPhase, Role
from agent_core.types.protocol import HookInput, TextBlock, ToolCall, ToolResult
from agent_core.types.runtime import Node, RunEnd, RunHandle

__all__ = ["EventWriter", "RunHooks"]

log = logging.getLogger("soong.hooks")


class EventWriter(Protocol):
    """Where hook executions are written: the run's timeline (the loop's ``RunStore``)."""

    async def append_event(
        self,
        event_type: EventType,
        *,
        level: EventLevel = EventLevel.INFO,
        node_id: str | None = None,
        tool_call_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        """Persist one timeline event of the run."""
        ...


_TOOL_PHASES = frozenset(
    {HookPhase.PRE_TOOL_USE, HookPhase.POST_TOOL_USE, HookPhase.POST_TOOL_USE_FAILURE}
)


class RunHooks:
    """The hooks in effect for one run of one agent (see the module docstring)."""

    def __init__(
        self,
        hooks: HookSet,
        *,
        handle: RunHandle,
        agent: AgentKind,
        events: EventWriter,
        env: Mapping[str, str],
        cwd: str | None = None,
        parent_run_id: str | None = None,
    ) -> None:
        self.handle = handle
        self.agent = agent
        self.cwd = cwd
        self.parent_run_id = parent_run_id
        self._by_phase = hooks.for_agent(agent)
        self._events = events
        self._env = dict(env)
        self._stop_denials = 0

    @classmethod
    def bind(cls, hooks: HookSet | None, **kw: Any) -> RunHooks | None:
        """A :class:`RunHooks` when any hook applies to the agent, else ``None`` (zero cost)."""
        if not hooks:
            return None
        bound = cls(hooks, **kw)
        return bound if bound._by_phase else None

    def has(self, phase: HookPhase) -> bool:
        """Whether any hook of ``phase`` applies to this agent."""
        return phase in self._by_phase

    @property
    def on_tools(self) -> bool:
        """Whether any hook of a tool call's events (PreToolUse, PostToolUse,
        PostToolUseFailure) applies to this agent, whatever its matcher."""
        return not _TOOL_PHASES.isdisjoint(self._by_phase)

    # -- the loop ----------------------------------------------------------------------------------

    async def start(self, path: Sequence[Node]) -> Verdict | None:
        """A fresh attempt begins on ``path`` (ending on the run's prompt): SessionStart when the
        agent has no earlier context, then UserPromptSubmit. Its verdict (``None``: no hook)."""
        run_id = self.handle.run_id
        if self.has(HookPhase.SESSION_START) and all(n.run_id == run_id for n in path):
            await self._run(HookPhase.SESSION_START, None)
        if not self.has(HookPhase.USER_PROMPT_SUBMIT):
            return None
        prompt = next(
            (n for n in reversed(path) if n.role is Role.USER and n.run_id == run_id), None
        )
        text = "" if prompt is None else "\n".join(_texts(prompt.content))
        return await self._run(HookPhase.USER_PROMPT_SUBMIT, None, prompt=text)

    async def stop(self, answer: str) -> Verdict | None:
        """The model answered without tool calls: may the run end? A denying verdict keeps the
        run going (``stop_hook_prevented`` is written); ``None``: no Stop hook."""
        if not self.has(HookPhase.STOP):
            return None
        verdict = await self._run(
            HookPhase.STOP, None, answer=answer, stop_hook_active=self._stop_denials > 0
        )
        if verdict.blocked:
            self._stop_denials += 1
            payload = {"hook": verdict.hook, "reason": verdict.reason, "count": self._stop_denials}
            await self._write(EventType.STOP_HOOK_PREVENTED, EventLevel.INFO, None, payload)
        return verdict

    async def pre_compact(self, path: Sequence[Node]) -> None:
        """Context compaction is about to shorten ``path`` (notification): called by the
        compactor once it has chosen what to cover, before the summarizer runs."""
        if self.has(HookPhase.PRE_COMPACT):
            await self._run(HookPhase.PRE_COMPACT, None, metadata={"path_nodes": len(path)})

    async def run_end(self, end: RunEnd) -> None:
        """The run's end is decided and about to be written (notification): RunEnd, then —
        for a child agent's run — SubagentStop. Never raises but ``CancelledError``."""
        fields: dict[str, Any] = {
            "end_status": end.status.value,
            "end_reason": end.end_reason.value,
        }
        try:
            if self.has(HookPhase.RUN_END):
                await self._run(HookPhase.RUN_END, None, **fields)
            if self.agent in ("sub", "fork") and self.has(HookPhase.SUBAGENT_STOP):
                await self._run(HookPhase.SUBAGENT_STOP, None, **fields)
        except Exception as exc:  # the end is written whatever its hooks' records did
            why = exc.code if isinstance(exc, AgentCoreError) else type(exc).__name__
            log.warning("run %s: end hooks not recorded (%s)", self.handle.run_id, why)

    # -- the tool executor -------------------------------------------------------------------------

    async def pre_tool(self, call: ToolCall, validate: Validator) -> Verdict | None:
        """Before ``call`` runs (its arguments valid): the PreToolUse verdict, ``None`` when no
        hook matches the tool. Rewritten arguments in it are already checked by ``validate``."""
        hooks = self._matching(HookPhase.PRE_TOOL_USE, call.name)
        if not hooks:
            return None
        return await self._run(
            HookPhase.PRE_TOOL_USE, call.id, hooks=hooks, validate=validate, tool_call=call
        )

    async def post_tool(self, call: ToolCall, result: ToolResult) -> ToolResult:
        """After ``call`` ran: PostToolUse (PostToolUseFailure for an error result). A block
        withholds the output (the model gets the reason as an error); context is appended."""
        phase = HookPhase.POST_TOOL_USE_FAILURE if result.is_error else HookPhase.POST_TOOL_USE
        hooks = self._matching(phase, call.name)
        if not hooks:
            return result
        verdict = await self._run(phase, call.id, hooks=hooks, tool_call=call, tool_result=result)
        if verdict.blocked:
            text = (
                f"The output of {call.name} was withheld by hook {verdict.hook}: {verdict.reason}"
            )
            meta = {**result.metadata, "error_code": "hook_withheld_output"}
            return result.model_copy(
                update={"content": [TextBlock(text=text)], "is_error": True, "metadata": meta}
            )
        if verdict.context:
            notes = [TextBlock(text=f"[hook {name}] {text}") for name, text in verdict.context]
            return result.model_copy(update={"content": [*result.content, *notes]})
        return result

    # -- running and recording ---------------------------------------------------------------------

    def _matching(self, phase: HookPhase, tool: str) -> tuple[Hook, ...]:
        hooks = self._by_phase.get(phase)
        if not hooks:
            return ()
        return tuple(h for h in hooks if h.matches(tool, self.agent))

    async def _run(
        self,
        phase: HookPhase,
        tool_call_id: str | None,
        *,
        hooks: Sequence[Hook] | None = None,
        validate: Validator | None = None,
        **fields: Any,
    ) -> Verdict:
        hook_input = HookInput(
            phase=phase,
            session_id=self.handle.session_id,
            run_id=self.handle.run_id,
            agent_id=self.handle.agent_id,
            agent_type=self.agent,
            parent_run_id=self.parent_run_id,
            cwd=self.cwd,
            **fields,
        )
        return await run_event(
            self._by_phase.get(phase, ()) if hooks is None else hooks,
            hook_input,
            env=self._env,
            record=self._record,
            cwd=self.cwd,
            validate=validate,
            tool_call_id=tool_call_id,
        )

    async def _record(self, record: HookRecord, tool_call_id: str | None) -> None:
        quiet = record.decision in ("allow", "rewrite")
        level = EventLevel.INFO if quiet else EventLevel.WARNING
        payload = {**record.payload(), "agent_type": self.agent}
        await self._write(EventType.HOOK_EXECUTED, level, tool_call_id, payload)

    async def _write(
        self,
        event_type: EventType,
        level: EventLevel,
        tool_call_id: str | None,
        payload: dict[str, Any],
    ) -> None:
        await self._events.append_event(
            event_type, level=level, tool_call_id=tool_call_id, payload=payload
        )


def _texts(blocks: Sequence[Any]) -> list[str]:
    return [b.text for b in blocks if isinstance(b, TextBlock)]
