"""The summarizer of a compaction: its own model call, its own budget, in chunks when needed.

The summarizer is an agent of purpose ``compact`` (``agents.metadata_json.purpose``):
it reads the covered part of the conversation (the previous summary first) and writes a summary
of at most ``summary_max_tokens``. Its input is limited by *its* window, not the agent's — a
conversation that overflowed the agent's model must still be summarizable — so the covered part
is cut into chunks that fit and summarized one after another, each pass reading the summary so
far plus the next chunk. A node too large for a chunk on its own is shortened (head and tail).
A summarizer that reports its own context overflow is tried again with chunks half the size.
Failures raise :class:`SummaryFailed`; the caller falls back to trimming.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_core.context.tokens import estimate_text, model_limits
from agent_core.errors import AgentCoreError
from agent_core.provider.base import ProviderAdapter
from agent_core.provider.errors import ProviderErrorCode
from agent_core.types.enums import Role
from agent_core.types.protocol import (
    ErrorEvent,
    ModelMessage,
    ModelRequest,
    SystemBlock,
    TextBlock,
    TextDeltaEvent,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    UsageEvent,
)
from agent_core.types.runtime import ContextPolicy, Node

__all__ = ["SummaryFailed", "Summarizer", "render_node"]

PROMPT = (
    "You compact a conversation between a user and an AI agent so the agent can continue its "
    "work with less context. Write a dense summary in the conversation's language: the user's "
    "goals and constraints, decisions made, what was tried and failed (so it is not tried "
    "again), files and artifacts touched, results of tool calls that still matter, and what "
    "remains to be done. Keep exact names, paths, numbers and identifiers. Do not invent "
    "anything. If a summary so far is given, fold the new part into it."
)
# Tokens of the summarizer's own framing (prompt, headings) kept free in each chunk's budget.
_FRAME = 400


class SummaryFailed(Exception):
    """The summarizer could not write a summary (``reason``: ``error``, ``overflow``, ``empty``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _clip(text: str, budget: int) -> tuple[str, int]:
    """``text`` shortened to about ``budget`` tokens, keeping its head and tail, with its
    estimate (each text is estimated once: a long history's chunking is CPU on the loop)."""
    tokens = estimate_text(text)
    if tokens <= budget:
        return text, tokens
    keep = max(40, int(len(text) * budget / tokens) // 2)
    clipped = f"{text[:keep]}\n[… {tokens - budget} tokens left out …]\n{text[-keep:]}"
    return clipped, estimate_text(clipped)


def render_node(node: Node) -> str:
    """One node as the summarizer reads it."""
    parts: list[str] = []
    for block in node.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            parts.append(f"[calls {block.name}({json.dumps(block.arguments)[:2000]})]")
        elif isinstance(block, ToolResultBlock):
            body = "\n".join(c.text for c in block.content if isinstance(c, TextBlock))
            parts.append(f"[result{' (error)' if block.is_error else ''}] {body}")
    label = {Role.USER: "USER", Role.ASSISTANT: "AGENT", Role.TOOL: "TOOL"}.get(node.role, "NOTE")
    return f"{label}: " + "\n".join(parts)


@dataclass
class Summarizer:
    """Writes summaries with ``model`` under ``policy`` (model name, budget, window)."""

    model: ProviderAdapter
    policy: ContextPolicy
    agent_model: str
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    # Set by :meth:`fit` from the agent's budget: its window (configured or learned) and the
    # longest summary worth writing in it.
    agent_window: int | None = None
    max_tokens: int | None = None

    @property
    def model_name(self) -> str:
        """The model the summaries are written with."""
        return self.policy.summary_model or self.agent_model

    def fit(self, context_window: int, input_budget: int) -> None:
        """Scale to the agent's window: a summarizer that is the agent's own model has the
        agent's window (configured, or learned from an overflow), not the one its name suggests;
        and a summary takes at most a quarter of the input budget, else it could make the
        context it compacts bigger (``policy.summary_max_tokens`` is the ceiling)."""
        self.agent_window = context_window
        self.max_tokens = min(self.policy.summary_max_tokens, max(64, input_budget // 4))

    @property
    def summary_tokens(self) -> int:
        """The longest summary asked for."""
        return self.max_tokens if self.max_tokens is not None else self.policy.summary_max_tokens

    def window(self) -> int:
        """The summarizer's own window: configured, else the agent's when it is the agent's
        model, else what its name is known for."""
        if self.policy.summary_window:
            return self.policy.summary_window
        if self.agent_window is not None and self.model_name == self.agent_model:
            return self.agent_window
        return model_limits(self.model_name).context_window

    def chunk_budget(self) -> int:
        """How many tokens of conversation one summarizer call may read."""
        return max(256, self.window() - self.summary_tokens - 2 * _FRAME)

    def chunks(self, nodes: Sequence[Node], budget: int) -> list[str]:
        """The rendered ``nodes`` cut into pieces of at most ``budget`` tokens each (less the
        summary so far, which each call reads too)."""
        room = max(128, budget - self.summary_tokens)
        chunks: list[str] = []
        current: list[str] = []
        used = 0
        for node in nodes:
            text, cost = _clip(render_node(node), room)
            if current and used + cost > room:
                chunks.append("\n\n".join(current))
                current, used = [], 0
            current.append(text)
            used += cost
        if current:
            chunks.append("\n\n".join(current))
        return chunks

    async def summarize(self, previous: str, nodes: Sequence[Node]) -> str:
        """The summary of ``previous`` (an earlier summary, may be empty) and ``nodes``. Raises
        :class:`SummaryFailed`; the caller bounds the time it takes."""
        budget = self.chunk_budget()
        for _ in range(3):
            try:
                summary = previous
                for chunk in self.chunks(nodes, budget):
                    summary = await self._call(summary, chunk)
                return summary
            except SummaryFailed as exc:
                if exc.reason != "overflow":
                    raise
                budget //= 2  # its window is smaller than we were told: read less at once
        raise SummaryFailed("overflow", "the summarizer's input overflowed its window")

    async def _call(self, summary: str, chunk: str) -> str:
        text = (
            f"Summary so far:\n{summary}\n\n" if summary else ""
        ) + f"Conversation to fold in:\n{chunk}"
        request = ModelRequest(
            model=self.model_name,
            system=[SystemBlock(text=PROMPT)],
            messages=[ModelMessage(role=Role.USER, content=[TextBlock(text=text)])],
            max_tokens=self.summary_tokens,
            metadata={"purpose": "compact"},
        )
        self.calls += 1
        out = ""
        try:
            stream = self.model.stream(request)
            try:
                async for event in stream:
                    if isinstance(event, TextDeltaEvent):
                        out += event.text
                    elif isinstance(event, UsageEvent):
                        self.usage = self.usage + event.usage
                    elif isinstance(event, ErrorEvent):
                        raise _failed(event.error.code, event.error.message)
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:
                    with contextlib.suppress(Exception):
                        await close()
        except AgentCoreError as exc:
            raise _failed(exc.code, exc.message) from exc
        if not out.strip():
            raise SummaryFailed("empty", "the summarizer wrote nothing")
        return out.strip()


def _failed(code: str, message: str) -> SummaryFailed:
    reason = "overflow" if code == ProviderErrorCode.CONTEXT_LENGTH_EXCEEDED else "error"
    return SummaryFailed(reason, f"{code}: {message}"[:300])
