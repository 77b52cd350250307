"""The loop's context guard: budgeted requests, compaction, and the two recovery paths.

* Every request is built with the session's calibration ratio; past the policy's threshold the
  older part of the path is compacted first (:class:`Compactor`) and the request rebuilt.
* Each response's reported prompt tokens recalibrate the estimate (per session and model); so
  does a provider's "context too long" error that names the prompt's size.
* A provider "context too long" error compacts (even below the threshold: the estimate was
  wrong) and the request is tried once more; a second one in a row ends the run
  ``prompt_too_long``. A window the error names that is smaller than the assumed one is used
  for the rest of the run.
* An answer cut by the output limit (no tool call) is stored and the model asked to continue, up
  to ``max_continuations`` times; after that the run ends ``max_output_tokens_recovery``. A tool
  call cut by the output limit never gets here: it is answered as a call to send again.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agent_core.context import CALIBRATION, WINDOWS, Calibration, ContextBuilder, LearnedWindows
from agent_core.context.compaction import Appender, Compactor, EventWriter
from agent_core.context.tokens import estimate_text
from agent_core.errors import ErrorPayload
from agent_core.provider.errors import ProviderErrorCode
from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import ModelRequest, TextBlock, ToolCall, ToolDefinition, Usage
from agent_core.types.runtime import AgentConfig, ContextBuildReport, Node, RunHandle

__all__ = ["COMPACT_COMMAND", "CONTINUE_PROMPT", "ContextGuard", "is_compact_command"]

COMPACT_COMMAND = "/compact"
"""A message that is exactly this (``POST …/compact``, ``/compact`` in the chat) asks for a
manual compaction: the run compacts everything before it and answers what it did."""

CONTINUE_PROMPT = (
    "Your previous answer was cut off by the output limit. Continue exactly where it stopped, "
    "without repeating what you already wrote."
)


def is_compact_command(path: Sequence[Node], run_id: str) -> bool:
    """Whether run ``run_id`` was started by the compact command and has not answered yet."""
    last = next((n for n in reversed(path) if n.role is not Role.SYSTEM), None)
    if last is None or last.role is not Role.USER or last.run_id != run_id:
        return False
    text = next((b.text for b in last.content if isinstance(b, TextBlock)), "")
    return text.strip() == COMPACT_COMMAND


class ContextGuard:
    """One run's context budget and recovery state (see the module docstring)."""

    def __init__(
        self,
        *,
        handle: RunHandle,
        config: AgentConfig,
        builder: ContextBuilder,
        compactor: Compactor,
        calibration: Calibration = CALIBRATION,
        before_compact: Callable[[Sequence[Node]], Awaitable[None]] | None = None,
        windows: LearnedWindows = WINDOWS,
    ) -> None:
        self.handle = handle
        self.windows = windows
        learned = windows.window(config.provider, config.base_url, config.model)
        if learned is not None and (
            config.context_window is None or learned < config.context_window
        ):
            # A window an earlier run learned from the server: start within it.
            config = config.model_copy(update={"context_window": learned})
        self.config = config
        self.builder = builder
        self.compactor = compactor
        self.calibration = calibration
        self.before_compact = before_compact  # the run's PreCompact hooks, if any
        self.report: ContextBuildReport | None = None
        self.reports: list[ContextBuildReport] = []  # every request's, for inspection and tests
        self.continuations = 0
        self._overflow_retried = False

    def _build(self, nodes: Sequence[Node], tools: Sequence[ToolDefinition]) -> ModelRequest:
        ratio = self.calibration.ratio(self.handle.session_id, self.config.model)
        request, self.report = self.builder.build(
            nodes,
            session_id=self.handle.session_id,
            config=self.config,
            tools=tools,
            run_id=self.handle.run_id,
            ratio=ratio,
        )
        return request

    async def request(
        self,
        nodes: list[Node],
        tools: Sequence[ToolDefinition],
        *,
        append: Appender,
        event: EventWriter,
        force: str | None = None,
    ) -> ModelRequest:
        """The next request after ``nodes``, compacting them first when over the threshold (or
        when ``force`` names a trigger)."""
        request = self._build(nodes, tools)
        assert self.report is not None
        if force is not None or self.compactor.over(self.report):
            trigger = force or "threshold"
            compacted = await self.compactor.compact(
                nodes,
                self.report,
                append=append,
                event=event,
                trigger=trigger,
                before=self.before_compact,
            )
            if compacted is not None:
                request = self._build(nodes, tools)
        assert self.report is not None
        self.reports.append(self.report)
        return request

    async def compact_now(
        self,
        nodes: list[Node],
        tools: Sequence[ToolDefinition],
        *,
        append: Appender,
        event: EventWriter,
    ) -> str:
        """A manual compaction of everything before the command; what was done, for the user.
        A run taken over after its compaction was stored answers with that one."""
        self._build(nodes, tools)
        assert self.report is not None
        done = next(
            (
                n
                for n in reversed(nodes)
                if n.node_type is NodeType.COMPACTION and n.run_id == self.handle.run_id
            ),
            None,
        )
        node = done or await self.compactor.compact(
            nodes,
            self.report,
            append=append,
            event=event,
            trigger="manual",
            before=self.before_compact,
        )
        if node is None:
            return "Nothing to compact yet: the conversation has no older part to summarize."
        meta = node.metadata
        self._build(nodes, tools)
        assert self.report is not None and self.report.budget is not None
        how = "summarized" if meta["method"] == "summary" else "left out (the summary failed)"
        return (
            f"Compacted: {meta['covered']} earlier messages are {how}; the context is now about "
            f"{self.report.budget.total} tokens (was {meta['tokens_before']}). The original "
            "messages stay in the session's history."
        )

    def observe(self, usage: Usage) -> None:
        """Calibrate with a response's reported prompt size; a response means the prompt fit.
        An estimated usage calibrates nothing (it is our own estimate already)."""
        self._overflow_retried = False
        if not usage.estimated:
            self._calibrate(self._prompt_tokens(usage))

    def estimated_usage(self, text: str, calls: Sequence[ToolCall]) -> Usage:
        """The usage of a response whose provider reported none: the last request's estimated
        size (calibrated) as its input, the answer's text and tool calls as its output."""
        budget = self.report.budget if self.report is not None else None
        output = estimate_text(text) + sum(
            estimate_text(call.name) + estimate_text(json.dumps(call.arguments)) for call in calls
        )
        return Usage(
            input_tokens=budget.total if budget is not None else 0,
            output_tokens=output,
            estimated=True,
        )

    def _prompt_tokens(self, usage: Usage) -> int:
        # Anthropic reports cached prompt tokens beside input_tokens, OpenAI within them.
        if self.config.provider == "anthropic":
            return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        return usage.input_tokens

    def _calibrate(self, reported: int) -> None:
        if self.report is None or self.report.budget is None or reported <= 0:
            return
        self.calibration.observe(
            self.handle.session_id,
            self.config.model,
            estimated=self.report.budget.estimated,
            reported=reported,
        )

    def retry_overflow(self, error: ErrorPayload) -> bool:
        """Whether a failed request is a context overflow to compact and try once more."""
        if error.code != ProviderErrorCode.CONTEXT_LENGTH_EXCEEDED or self._overflow_retried:
            return False
        self._overflow_retried = True
        reported = error.details.get("prompt_tokens")
        if isinstance(reported, int):  # the provider told us how far off the estimate was
            self._calibrate(reported)
        limit = error.details.get("context_limit")
        budget = self.report.budget if self.report is not None else None
        if isinstance(limit, int) and limit >= 1024 and budget and limit < budget.context_window:
            # The real window is smaller than the configured or assumed one: use it from now on,
            # in this run and the process's next ones.
            self.config = self.config.model_copy(update={"context_window": limit})
            self.windows.learn(self.config.provider, self.config.base_url, self.config.model, limit)
        return True

    def may_continue(self) -> bool:
        """Whether an answer cut by the output limit may be continued once more (counts it)."""
        if self.continuations >= self.config.context.max_continuations:
            return False
        self.continuations += 1
        return True

    @staticmethod
    def continuation_node() -> tuple[Role, list[TextBlock], NodeType, dict[str, Any]]:
        """The request to continue a cut answer, as the node stored after it."""
        return (
            Role.USER,
            [TextBlock(text=CONTINUE_PROMPT)],
            NodeType.SYSTEM_NOTE,
            {"continuation": True},
        )
