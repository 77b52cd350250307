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
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from agent_core.context import ContextBuilder
from agent_core.context.compaction import Compactor
from agent_core.errors import AgentCoreError, ErrorPayload
from agent_core.hooks.run import RunHooks
from agent_core.ids import new_id
from agent_core.provider.base import ProviderAdapter
from agent_core.provider.errors import ProviderErrorCode
from agent_core.runtime import hook_steps
from agent_core.runtime.ending import Ending, cancelled_reason, ending
from agent_core.runtime.ports import EventSink, RunStore, ToolRunner
from agent_core.runtime.recovery import ContextGuard, is_compact_command
from agent_core.skills.active import skill_context_nodes
from agent_core.types.enums import (
    EndReason,
    EventLevel,
    EventType,
    InvalidToolCallReason,
    NodeType,
    Role,
    RunStatus,
    StopReason,
)
from agent_core.types.protocol import (
    ContentBlock,
    ErrorEvent,
    MessageEndEvent,
    ModelRequest,
    TextBlock,
    TextDeltaEvent,
    ToolCall,
    ToolCallBlock,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallInvalidEvent,
    ToolCallStartEvent,
    ToolResult,
    Usage,
    UsageEvent,
)
from agent_core.types.runtime import (
    AgentConfig,
    Node,
    RunHandle,
    RunNodeCreated,
    RunPhase,
    RunTaskChanged,
    RunTextDelta,
    RunToolResult,
    RunToolStarted,
    RunUsage,
)

__all__ = ["AgentLoop", "LoopPhase"]

# Tool nodes may carry the meaning their tools declare (a template tool's result is a
# ``task_instruction`` / ``plan_instruction`` node, a child agent's answer a ``child_result``).
_TOOL_NODE_TYPES = frozenset(
    {NodeType.TASK_INSTRUCTION, NodeType.PLAN_INSTRUCTION, NodeType.CHILD_RESULT}
)


def _declared_type(results: list[ToolResult]) -> NodeType:
    declared = {r.metadata.get("node_type") for r in results}
    if len(declared) == 1:
        value = declared.pop()
        if value in {t.value for t in _TOOL_NODE_TYPES}:
            return NodeType(value)
    return NodeType.MESSAGE


# How much of a parser's complaint the model is shown (it names the position, not the text).
_PARSER_ERROR_CHARS = 300


def _rejected_call(event: ToolCallInvalidEvent) -> tuple[ToolCall, ToolResult]:
    """A streamed call the model must fix, and the error result that tells it how.

    The call stays in the model's answer (without arguments: they were not a JSON object) so the
    next request pairs it with its result; it is never executed. A call the output limit cut off
    is asked for again the same way, in smaller pieces."""
    name = event.name or "unnamed_tool"
    if event.reason is InvalidToolCallReason.TRUNCATED:
        code = ProviderErrorCode.TOOL_CALL_TRUNCATED.value
        text = (
            f"Your call to {name!r} was cut off by the output limit before its arguments were "
            "complete, so it was not run. Call it again with shorter arguments (split large "
            "content over several calls)."
        )
    else:
        code = ProviderErrorCode.INVALID_TOOL_ARGUMENTS.value
        text = (
            f"Your call to {name!r} was not run: its arguments are not a valid JSON object "
            f"({event.error[:_PARSER_ERROR_CHARS]}). Call it again with the arguments as one "
            "JSON object."
        )
    result = ToolResult(
        tool_call_id=event.id,
        content=[TextBlock(text=text)],
        is_error=True,
        metadata={"error_code": code},
    )
    return ToolCall(id=event.id, name=name), result


LoopPhase = Literal["idle", "streaming", "tools"]
# Model events that mean the answer has begun to arrive (the model phase becomes ``streaming``).
_ARRIVING = (TextDeltaEvent, ToolCallStartEvent, ToolCallDeltaEvent, ToolCallEndEvent)
E = TypeVar(
    "E",
    RunTextDelta,
    RunToolStarted,
    RunToolResult,
    RunNodeCreated,
    RunUsage,
    RunTaskChanged,
    RunPhase,
)


@dataclass
class _Response:
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop: StopReason = StopReason.END_TURN
    error: ErrorPayload | None = None
    # Calls the model got wrong, by id, answered without running (see ``_rejected_call``).
    rejected: dict[str, ToolResult] = field(default_factory=dict)


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
    ) -> None:
        self.handle = handle
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
        self._tool_slots = asyncio.Semaphore(max_parallel_tools)
        # Budget, compaction and recovery (agent_core.runtime.recovery).
        self.context = ContextGuard(
            handle=handle,
            config=config,
            builder=self.builder,
            compactor=compactor or Compactor(config, model),
            before_compact=hooks.pre_compact if hooks is not None else None,
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
            outcome = await self._settle(nodes, response)
            if isinstance(outcome, Ending):
                return outcome
            force = "overflow" if outcome == "overflow" else None
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
            await self._tool_turn(nodes, calls, last.node_id)
        elif self.hooks is not None and fresh:
            return await hook_steps.start(self, nodes)
        return None

    async def _model_turn(self, nodes: list[Node], force: str | None) -> _Response:
        """One model call on the context of ``nodes`` (compacted first when it is due, or when
        ``force`` says an overflow must be retried), counted as a turn with its usage."""
        # Asked each turn: a loaded skill's allowed tools narrow what is offered.
        definitions = list(self.tools.definitions()) if self.tools else []
        request = await self.context.request(
            nodes, definitions, append=self._append, event=self.store.append_event, force=force
        )
        self.phase = "streaming"
        self._announce_phase("model")
        response = await self._stream(request)
        self.phase = "idle"
        self.turns += 1
        self.usage = self.usage + response.usage
        self.events.emit(self._event(RunUsage, usage=response.usage, total=self.usage))
        return response

    async def _settle(
        self, nodes: list[Node], response: _Response
    ) -> Ending | Literal["again", "overflow"] | None:
        """What a model turn leads to: the run's end; ``"again"`` (another model call: a cut
        answer continued, a Stop hook's denial); ``"overflow"`` (compact and retry once); or
        ``None`` once its tool calls have run."""
        budget = self.config.budget
        if response.error is not None and not response.text and not response.calls:
            if self.context.retry_overflow(response.error):
                return "overflow"
        else:
            self.context.observe(response.usage)
        if response.error is not None:  # what was streamed stays, as a partial answer
            reason = EndReason.FAILED
            if response.error.code == ProviderErrorCode.CONTEXT_LENGTH_EXCEEDED:
                reason = EndReason.PROMPT_TOO_LONG
            return self.ending(RunStatus.FAILED, reason, error=response.error)
        blocks = self._assistant_blocks(response)
        over_budget = (
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
            return "again"
        if not response.calls and not over_budget:
            if self.hooks is not None and await hook_steps.stop_denied(self, nodes, blocks):
                return "again"  # a Stop hook denied the end: another turn, within max_turns
            # The answer's node and the run's end are one write (the driver's).
            reason = EndReason.COMPLETED
            if cut:  # still cut after every continuation it was allowed
                reason = EndReason.MAX_OUTPUT_TOKENS_RECOVERY
            self.partial_text = ""
            return self.ending(RunStatus.COMPLETED, reason, answer=blocks)
        assistant = await self._append(nodes, Role.ASSISTANT, blocks)
        self.partial_text = ""
        if over_budget:
            assert budget.max_total_tokens is not None
            return self._budget_exceeded("max_tokens", budget.max_total_tokens)
        await self._tool_turn(nodes, response.calls, assistant.node_id, response.rejected)
        return None

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

    async def _tool_turn(
        self,
        nodes: list[Node],
        calls: list[ToolCall],
        assistant_id: str,
        rejected: dict[str, ToolResult] | None = None,
    ) -> None:
        """Run the calls (a ``rejected`` one is answered by its error result instead), store every
        result in one tool node, then what the results report."""
        self.phase = "tools"
        self._announce_phase("tools", tools=len(calls))
        results = await self._run_tools(calls, assistant_id, rejected or {})
        self.phase = "idle"
        await self._append(
            nodes, Role.TOOL, [r.to_block() for r in results], node_type=_declared_type(results)
        )
        await self._record_task_changes(nodes, calls, results)
        for kind, blocks, meta in skill_context_nodes(results):  # load_skill: body, memory
            await self._append(nodes, Role.SYSTEM, blocks, node_type=kind, metadata=meta)
        for call, result in zip(calls, results, strict=True):
            if result.is_error:
                await self.store.append_event(
                    EventType.TOOL_FAILED,
                    level=EventLevel.WARNING,
                    node_id=self.last_node_id,
                    tool_call_id=call.id,
                    payload={"tool": call.name, "error_code": result.metadata.get("error_code")},
                )

    # -- model -------------------------------------------------------------------------------------

    async def _stream(self, request: ModelRequest) -> _Response:
        response = _Response()
        turn = self.turns
        arriving = False
        try:
            stream = self.model.stream(request)
            try:
                async for event in stream:
                    if not arriving and isinstance(event, _ARRIVING):
                        arriving = True
                        self._announce_phase("streaming")
                    if isinstance(event, TextDeltaEvent):
                        delta = self._event(
                            RunTextDelta,
                            turn=turn,
                            text=event.text,
                            attempt=self.handle.attempt,
                            offset=len(response.text),
                        )
                        response.text += event.text
                        self.partial_text = response.text
                        self.events.emit(delta)
                    elif isinstance(event, ToolCallEndEvent):
                        response.calls.append(
                            ToolCall(id=event.id, name=event.name, arguments=event.arguments)
                        )
                    elif isinstance(event, UsageEvent):
                        response.usage = response.usage + event.usage
                    elif isinstance(event, MessageEndEvent):
                        response.stop = event.stop_reason
                    elif isinstance(event, ToolCallInvalidEvent):
                        # The model's to fix: answered with an error result, never executed.
                        call, result = _rejected_call(event)
                        response.calls.append(call)
                        response.rejected[call.id] = result
                    elif isinstance(event, ErrorEvent):
                        response.error = event.error
            finally:
                # Closing the generator closes the HTTP stream (cancellation included).
                close = getattr(stream, "aclose", None)
                if close is not None:
                    await close()
        except AgentCoreError as exc:  # ProviderError before the first event, capability errors
            response.error = exc.to_payload()
        return response

    @staticmethod
    def _assistant_blocks(response: _Response) -> list[ContentBlock]:
        blocks: list[ContentBlock] = []
        if response.text:
            blocks.append(TextBlock(text=response.text))
        blocks += [
            ToolCallBlock(id=c.id, name=c.name, arguments=c.arguments) for c in response.calls
        ]
        return blocks or [TextBlock(text="")]

    # -- tools -------------------------------------------------------------------------------------

    async def _run_tools(
        self, calls: list[ToolCall], node_id: str, rejected: dict[str, ToolResult]
    ) -> list[ToolResult]:
        async def one(call: ToolCall) -> ToolResult:
            async with self._tool_slots:
                self.events.emit(
                    self._event(
                        RunToolStarted,
                        tool_call_id=call.id,
                        name=call.name,
                        arguments=call.arguments,
                    )
                )
                if call.id in rejected:
                    result = rejected[call.id]
                elif self.tools is None:
                    result = ToolResult(
                        tool_call_id=call.id,
                        content=[
                            TextBlock(text=f"No tools are available; {call.name!r} was not run.")
                        ],
                        is_error=True,
                        metadata={"error_code": "unknown_tool"},
                    )
                else:
                    result = await self.tools.execute(call, node_id=node_id)
                self.events.emit(
                    self._event(
                        RunToolResult,
                        tool_call_id=call.id,
                        name=call.name,
                        is_error=result.is_error,
                        content=result.content,
                    )
                )
                return result

        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(one(c)) for c in calls]
        return [t.result() for t in tasks]

    # -- nodes and outcomes ------------------------------------------------------------------------

    async def _record_task_changes(
        self, nodes: list[Node], calls: list[ToolCall], results: list[ToolResult]
    ) -> None:
        """Task tools report changes in their metadata: a runtime + timeline event per change,
        and one ``task_board`` node with the newest board after the tool node."""
        board = None
        for call, result in zip(calls, results, strict=True):
            change = result.metadata.get("task_event")
            if isinstance(change, dict):
                self.events.emit(
                    self._event(
                        RunTaskChanged,
                        list_name=str(change.get("list", "")),
                        change=str(change.get("change", "")),
                        task_id=change.get("task_id"),
                        tool_call_id=call.id,
                    )
                )
                await self.store.append_event(
                    EventType.TASK_CHANGED, tool_call_id=call.id, payload=dict(change)
                )
            if isinstance(result.metadata.get("task_board"), str):
                board = result.metadata["task_board"]
        if board:
            await self._append(
                nodes, Role.SYSTEM, [TextBlock(text=board)], node_type=NodeType.TASK_BOARD
            )

    async def _append(
        self,
        nodes: list[Node],
        role: Role,
        blocks: list[ContentBlock],
        *,
        node_type: NodeType = NodeType.MESSAGE,
        metadata: dict[str, Any] | None = None,
    ) -> Node:
        node = Node(
            node_id=new_id("node"),
            parent_id=nodes[-1].node_id,
            agent_id=self.handle.agent_id,
            run_id=self.handle.run_id,
            role=role,
            node_type=node_type,
            content=blocks,
            metadata=metadata or {},
        )
        write = asyncio.ensure_future(self.store.append_node(node))
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
        self.events.emit(self._event(RunNodeCreated, node=stored))
        return stored

    def _announce_phase(
        self, phase: Literal["model", "streaming", "tools"], tools: int = 0
    ) -> None:
        """The activity area's line: what the run does now, in which turn of how many."""
        turn = self.turns + 1 if phase != "tools" else max(self.turns, 1)
        self.events.emit(
            self._event(
                RunPhase, phase=phase, turn=turn, max_turns=self.config.max_turns, tools=tools
            )
        )

    def _event(self, cls: type[E], **fields: Any) -> E:
        return cls(
            run_id=self.handle.run_id,
            session_id=self.handle.session_id,
            agent_id=self.handle.agent_id,
            **fields,
        )

    def _budget_exceeded(self, limit: str, value: float) -> Ending:
        error = ErrorPayload(
            type="budget_exceeded",
            code="budget_exceeded",
            message=f"the run exceeded its {limit} budget ({value})",
            details={"limit": limit, "value": value},
        )
        return self.ending(RunStatus.FAILED, EndReason.FAILED, error=error)
