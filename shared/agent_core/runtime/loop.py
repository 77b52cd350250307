"""The agent loop: context → model stream → assistant node → tools → tool node → repeat.

Invariants:

* a node becomes visible (``node_created``) only after the store committed it;
* the assistant node with its tool calls is durable *before* any tool runs, and the tool node with
  every result is durable before the next model call — so after a crash the stored tree tells
  exactly which tool calls ran (see :func:`resume_point`);
* one bad tool call never ends a run: it is an ``is_error`` result plus a ``tool_failed`` event.

The loop never writes its run's end: it returns an :class:`Ending` (the answer, not yet stored,
goes with it), and the driver that owns the loop's task writes it in one command. Cancellation,
timeouts and exceptions are the driver's too (:mod:`agent_core.runtime.drive`): it asks
:meth:`AgentLoop.ending` for the end of what the loop did so far.

This module is the loop's spine: streaming a model call is
:mod:`agent_core.runtime.model_stream`'s, a tool turn :mod:`agent_core.runtime.tool_turn`'s, the
hook steps :mod:`agent_core.runtime.hook_steps`'s. Those steps are given the loop's
:class:`~agent_core.runtime.steps.StepContext`, built once, never the loop itself; what a model
turn leads to is a typed :data:`~agent_core.runtime.steps.NextStep`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any, assert_never

from agent_core.context import ContextBuilder
from agent_core.context.compaction import Compactor
from agent_core.errors import ErrorPayload
from agent_core.hooks.run import RunHooks
from agent_core.provider.base import ProviderAdapter
from agent_core.provider.errors import ProviderErrorCode
from agent_core.runtime import hook_steps
from agent_core.runtime.budget import AccountBudget
from agent_core.runtime.ending import Ending, cancelled_reason, ending
from agent_core.runtime.model_stream import ModelResponse, assistant_blocks, stream_response
from agent_core.runtime.ports import EventSink, RunStore, ToolRunner
from agent_core.runtime.recovery import ContextGuard, is_compact_command
from agent_core.runtime.steps import (
    AnnouncedPhase,
    Continue,
    LoopPhase,
    NextStep,
    Overflow,
    StepContext,
    child_node,
)
from agent_core.runtime.tool_turn import run_tool_turn
from agent_core.types.enums import (
    EndReason,
    NodeType,
    Role,
    RunStatus,
    StopReason,
)
from agent_core.types.protocol import (
    ContentBlock,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    Usage,
)
from agent_core.types.runtime import (
    AgentConfig,
    Node,
    RunHandle,
    RunNodeCreated,
    RunPhase,
    RunUsage,
    TimelineEvent,
)

__all__ = ["AgentLoop", "LoopPhase"]


class AgentLoop:
    """Runs one attempt of one run from a given path (see the module docstring)."""

    def __init__(
        self,
        *,
        handle: RunHandle,
        config: AgentConfig,
        model: ProviderAdapter,
        store: RunStore,
        events: EventSink,
        tools: ToolRunner | None = None,
        builder: ContextBuilder | None = None,
        max_parallel_tools: int = 4,
        compactor: Compactor | None = None,
        hooks: RunHooks | None = None,
        account_budget: AccountBudget | None = None,
    ) -> None:
        self.handle = handle
        # The account's token budget (agent_core.runtime.budget): None when it has none.
        self.account_budget = account_budget
        self.hooks = hooks  # None when no hook applies to the run (agent_core/hooks)
        self.config = config
        self.model = model
        self.store = store
        self.events = events
        self.tools = tools
        self.builder = builder or ContextBuilder()
        self.phase: LoopPhase = "idle"
        # Text the model streamed in the current turn that no stored node holds yet.
        self.partial_text = ""
        self.usage = Usage()
        self.turns = 0
        self.last_node_id: str | None = None
        # The path this attempt works on: the given one, then every node it stored.
        self.nodes: list[Node] = []
        # Budget, compaction and recovery (agent_core.runtime.recovery).
        self.context = ContextGuard(
            handle=handle,
            config=config,
            builder=self.builder,
            compactor=compactor or Compactor(config, model),
            before_compact=hooks.pre_compact if hooks is not None else None,
        )
        # All the steps (model stream, tool turn, hooks) may use of this loop.
        self._steps = StepContext(
            handle=handle,
            model=model,
            store=store,
            events=events,
            tools=tools,
            hooks=hooks,
            tool_slots=asyncio.Semaphore(max_parallel_tools),
            append=self._append,
            announce_phase=self._announce_phase,
            set_phase=self._set_phase,
            set_partial_text=self._set_partial_text,
            end=self.ending,
        )

    async def run(
        self,
        path: Sequence[Node],
        *,
        turns_done: int = 0,
        usage: Usage | None = None,
        rerun_calls: bool = False,
    ) -> Ending:
        """Continue the run after the last node of ``path`` until it ends; return its end (not
        yet written). ``rerun_calls``: ``path`` ends on tool calls without results (a recovered
        run whose tools may run again): run them first. Raises what the store raises, and
        ``CancelledError``."""
        nodes = self.nodes = list(path)
        self.turns = turns_done
        self.usage = usage or Usage()
        self.last_node_id = nodes[-1].node_id
        started = time.monotonic()
        opened = await self._open(nodes, fresh=not turns_done, rerun_calls=rerun_calls)
        if opened is not None:
            return opened
        wall_clock = self.config.budget.max_wall_clock_s
        force: str | None = None
        while self.turns < self.config.max_turns:
            if wall_clock is not None and time.monotonic() - started > wall_clock:
                return self._budget_exceeded("wall_clock", wall_clock)
            response = await self._model_turn(nodes, force)
            match await self._settle(nodes, response):
                case Ending() as end:
                    return end
                case Overflow():
                    force = "overflow"
                case Continue():
                    force = None
                case unexpected:
                    assert_never(unexpected)
        return self.ending(RunStatus.COMPLETED, EndReason.MAX_TURNS)

    async def _open(self, nodes: list[Node], *, fresh: bool, rerun_calls: bool) -> Ending | None:
        """What comes before the first model call: a ``/compact`` command's whole run, a
        recovered run's tool calls run again, or a fresh run's start hooks (which may block)."""
        if not rerun_calls and is_compact_command(nodes, self.handle.run_id):
            definitions = list(self.tools.definitions()) if self.tools else []
            text = await self.context.compact_now(
                nodes, definitions, append=self._append, event=self.store.append_event
            )
            answer: list[ContentBlock] = [TextBlock(text=text)]
            return self.ending(RunStatus.COMPLETED, EndReason.COMPLETED, answer=answer)
        if rerun_calls:
            last = nodes[-1]
            calls = [
                ToolCall(id=b.id, name=b.name, arguments=b.arguments)
                for b in last.content
                if isinstance(b, ToolCallBlock)
            ]
            await run_tool_turn(self._steps, nodes, calls, last.node_id)
        elif self.hooks is not None and fresh:
            return await hook_steps.start(self._steps, nodes)
        return None

    async def _model_turn(self, nodes: list[Node], force: str | None) -> ModelResponse:
        """One model call on the context of ``nodes`` (compacted first when it is due, or when
        ``force`` says an overflow must be retried), counted as a turn with its usage."""
        # Asked each turn: a loaded skill's allowed tools narrow what is offered.
        definitions = list(self.tools.definitions()) if self.tools else []
        request = await self.context.request(
            nodes, definitions, append=self._append, event=self.store.append_event, force=force
        )
        self.phase = "streaming"
        self._announce_phase("model")
        response = await stream_response(self._steps, request, turn=self.turns + 1)
        if not response.usage_reported and response.error is None:
            # The server answered and sent no usage (many local ones don't): count our
            # estimates, marked as such, rather than a call that looks free. (A failed call's
            # usage stays what it reported, if anything: nobody knows what it cost.)
            response.usage = self.context.estimated_usage(response.text, response.calls)
        self.phase = "idle"
        self.turns += 1
        self.usage = self.usage + response.usage
        self.events.emit(self._steps.event(RunUsage, usage=response.usage, total=self.usage))
        return response

    async def _settle(self, nodes: list[Node], response: ModelResponse) -> NextStep:
        """What a model turn leads to: the run's end; :class:`Overflow` (compact and retry
        once); or :class:`Continue` (another model call: a cut answer continued, a Stop hook's
        denial, or once its tool calls have run)."""
        budget = self.config.budget
        if response.error is not None and not response.text and not response.calls:
            if self.context.retry_overflow(response.error):
                return Overflow()
        else:
            self.context.observe(response.usage)
        if response.error is not None:  # what was streamed stays, as a partial answer
            reason = EndReason.FAILED
            if response.error.code == ProviderErrorCode.CONTEXT_LENGTH_EXCEEDED:
                reason = EndReason.PROMPT_TOO_LONG
            return self.ending(RunStatus.FAILED, reason, error=response.error)
        blocks = assistant_blocks(response)
        exhausted = self.account_budget is not None and self.account_budget.exhausted_by(
            self.usage.total_tokens
        )
        over_budget = exhausted or (
            budget.max_total_tokens is not None
            and self.usage.total_tokens > budget.max_total_tokens
        )
        cut = response.stop is StopReason.MAX_TOKENS and not response.calls
        if cut and not over_budget and self.context.may_continue():
            # Cut by the output limit: keep what came and ask for the rest.
            await self._append(nodes, Role.ASSISTANT, blocks, metadata={"cut": "max_tokens"})
            self.partial_text = ""
            role, ask, kind, meta = self.context.continuation_node()
            await self._append(nodes, role, list(ask), node_type=kind, metadata=meta)
            return Continue()
        if not response.calls and not over_budget:
            if self.hooks is not None and await hook_steps.stop_denied(self._steps, nodes, blocks):
                return Continue()  # a Stop hook denied the end: another turn, within max_turns
            # The answer's node and the run's end are one write (the driver's).
            reason = EndReason.COMPLETED
            if cut:  # still cut after every continuation it was allowed
                reason = EndReason.MAX_OUTPUT_TOKENS_RECOVERY
            self.partial_text = ""
            return self.ending(RunStatus.COMPLETED, reason, answer=blocks)
        assistant = await self._append(nodes, Role.ASSISTANT, blocks)
        self.partial_text = ""
        if exhausted:
            assert self.account_budget is not None
            error = self.account_budget.error(self.usage.total_tokens)
            return self.ending(RunStatus.FAILED, EndReason.BUDGET_EXHAUSTED, error=error)
        if over_budget:
            assert budget.max_total_tokens is not None
            return self._budget_exceeded("max_tokens", budget.max_total_tokens)
        await run_tool_turn(
            self._steps, nodes, response.calls, assistant.node_id, response.rejected
        )
        return Continue()

    def ending(
        self,
        status: RunStatus,
        reason: EndReason,
        *,
        error: ErrorPayload | None = None,
        answer: list[ContentBlock] | None = None,
        exception: BaseException | None = None,
    ) -> Ending:
        """The end of the run after what this loop did: its turns, usage and path, and text the
        model streamed that no node holds (see :mod:`agent_core.runtime.ending`)."""
        return ending(
            self.handle,
            self.nodes,
            status,
            reason,
            turns=self.turns,
            usage=self.usage,
            error=error,
            answer=answer,
            partial_text=self.partial_text,
            exception=exception,
        )

    def cancelled(self) -> Ending:
        """The end of the run after a cancel stopped this loop (``aborted_tools`` while tools
        ran, ``aborted_streaming`` otherwise)."""
        return self.ending(RunStatus.CANCELLED, cancelled_reason(self.phase == "tools"))

    # -- nodes and outcomes ------------------------------------------------------------------------

    async def _append(
        self,
        nodes: list[Node],
        role: Role,
        blocks: list[ContentBlock],
        *,
        node_type: NodeType = NodeType.MESSAGE,
        metadata: dict[str, Any] | None = None,
        events: Sequence[TimelineEvent] = (),
    ) -> Node:
        node = child_node(
            self.handle, nodes[-1], role, blocks, node_type=node_type, metadata=metadata
        )
        write = asyncio.ensure_future(self.store.append_node(node, events=events))
        try:
            stored = await asyncio.shield(write)
        except asyncio.CancelledError:
            # A cancel while the node is written lets the write finish first, so the path the
            # run's end is built on holds exactly what is stored; then the cancel goes on.
            while not write.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({write})
            if not write.cancelled() and write.exception() is None:
                self._stored(nodes, write.result())
            raise
        return self._stored(nodes, stored)

    def _stored(self, nodes: list[Node], stored: Node) -> Node:
        nodes.append(stored)
        self.last_node_id = stored.node_id
        self.events.emit(self._steps.event(RunNodeCreated, node=stored))
        return stored

    def _announce_phase(self, phase: AnnouncedPhase, tools: int = 0) -> None:
        """The activity area's line: what the run does now, in which turn of how many."""
        turn = self.turns + 1 if phase != "tools" else max(self.turns, 1)
        self.events.emit(
            self._steps.event(
                RunPhase, phase=phase, turn=turn, max_turns=self.config.max_turns, tools=tools
            )
        )

    def _set_phase(self, phase: LoopPhase) -> None:
        self.phase = phase

    def _set_partial_text(self, text: str) -> None:
        self.partial_text = text

    def _budget_exceeded(self, limit: str, value: float) -> Ending:
        error = ErrorPayload(
            type="budget_exceeded",
            code="budget_exceeded",
            message=f"the run exceeded its {limit} budget ({value})",
            details={"limit": limit, "value": value},
        )
        return self.ending(RunStatus.FAILED, EndReason.FAILED, error=error)
