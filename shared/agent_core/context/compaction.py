"""Compaction: when the active path outgrows its budget, a ``compaction`` node takes the older
part's place in the context (see :mod:`agent_core.context.compacted` for what the node means).

:func:`plan` chooses what to cover: everything the previous compaction did not, up to the most
recent ``keep`` tokens, which stay verbatim; the cut never separates a tool result from its call.
It pins the user's recent words (the last few user messages of the covered part, each of modest
size, and any marked ``pinned``) and the newest plan / task instruction; pins of earlier
compactions carry over. System nodes (memory, skills, task board, notes) are never covered.

:class:`Compactor` writes the node: a summary by the :class:`Summarizer` within the policy's
time limit, or — when the summarizer errors, times out or overflows — a *trim*: the covered nodes
are dropped from the context, the earlier summary is kept, and a warning event says so. Either
way the recent nodes, the pinned ones and the system nodes remain: the context is never emptied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_core.context.compacted import compacted_view
from agent_core.context.summarize import Summarizer, SummaryFailed
from agent_core.context.tokens import estimate_text, node_tokens
from agent_core.provider.base import ProviderAdapter
from agent_core.types.enums import EventLevel, EventType, NodeType, Role
from agent_core.types.protocol import ContentBlock, TextBlock, Usage
from agent_core.types.runtime import AgentConfig, ContextBuildReport, Node

__all__ = ["Appender", "CompactAgents", "CompactionPlan", "Compactor", "plan"]

# User messages up to this size are pinned verbatim (a pasted document is summarized instead).
PIN_USER_MAX_TOKENS = 1000
# How many of the newest user messages of a covered part are pinned, and how many in all.
PIN_USER_RECENT = 3
PIN_USER_TOTAL = 8
# The share of the input budget the pinned user messages may take together: 8 messages of 1,000
# tokens pinned in a 2,048-token window would leave no room for anything else, for good.
PIN_SHARE = 0.125
_INSTRUCTIONS = (NodeType.PLAN_INSTRUCTION, NodeType.TASK_INSTRUCTION)


_cost = node_tokens


@dataclass(slots=True)
class CompactionPlan:
    """What one compaction covers: path indexes ``start..end`` (inclusive) beyond the previous
    compaction's, the nodes to summarize, the ids to pin and the previous summary."""

    start: int
    end: int
    covered: list[Node] = field(default_factory=list)
    pinned: list[str] = field(default_factory=list)
    previous: str = ""
    previous_count: int = 0

    @property
    def covers_through(self) -> str:
        """The id stored as the node's ``covers_through``."""
        return self.covered[-1].node_id


def plan(path: Sequence[Node], keep: int, pin_budget: int | None = None) -> CompactionPlan | None:
    """What to cover so that about ``keep`` tokens of the newest messages stay verbatim;
    ``None`` when nothing new can be covered. The pinned user messages take at most
    ``pin_budget`` tokens together (the newest first; no bound when ``None``)."""
    view = compacted_view(path)
    start, previous, previous_count, carried = 0, "", 0, []
    if view is not None:
        meta = view.node.metadata
        start = next(i for i, n in enumerate(path) if n.node_id == meta["covers_through"]) + 1
        previous = "\n".join(b.text for b in view.node.content if isinstance(b, TextBlock))
        previous_count = int(meta.get("covered", 0))
        carried = [str(i) for i in meta.get("pinned", [])]
    messages = [
        i
        for i in range(start, len(path))
        if path[i].role is not Role.SYSTEM and path[i].node_type is not NodeType.COMPACTION
    ]
    if len(messages) < 2:
        return None
    first_kept = len(messages) - 1  # the newest message is always kept
    used = _cost(path[messages[first_kept]])
    while first_kept > 0 and used + _cost(path[messages[first_kept - 1]]) <= keep:
        first_kept -= 1
        used += _cost(path[messages[first_kept]])
    # A kept tool result needs its call: keep the assistant node that made it too.
    while first_kept > 0 and path[messages[first_kept]].role is Role.TOOL:
        first_kept -= 1
    if first_kept == 0:
        return None
    covered = [path[i] for i in messages[:first_kept]]
    result = CompactionPlan(
        start=start,
        end=messages[first_kept - 1],
        covered=covered,
        previous=previous,
        previous_count=previous_count,
    )
    result.pinned = _pins(path, carried, covered, pin_budget)
    return result


def _pins(
    path: Sequence[Node], carried: list[str], covered: list[Node], budget: int | None
) -> list[str]:
    by_id = {n.node_id: n for n in path}
    users = [i for i in carried if i in by_id and by_id[i].role is Role.USER]
    asked = [n for n in covered if n.role is Role.USER and n.node_type is NodeType.MESSAGE]
    marked = [n.node_id for n in asked if n.metadata.get("pinned") is True]
    # The newest few short ones (priced newest first, only until enough are found: a long
    # history is not estimated whole for three pins).
    recent: list[str] = []
    for n in reversed(asked):
        if len(recent) == PIN_USER_RECENT:
            break
        if n.metadata.get("pinned") is True or _cost(n) <= PIN_USER_MAX_TOKENS:
            recent.append(n.node_id)
    recent.reverse()
    users = list(dict.fromkeys([*users, *marked, *recent]))[-PIN_USER_TOTAL:]
    if budget is not None:
        cost = {i: _cost(by_id[i]) for i in users}
        kept: list[str] = []
        for node_id in reversed(users):  # the newest words first, while they fit
            if sum(cost[i] for i in kept) + cost[node_id] <= budget:
                kept.append(node_id)
        users = [i for i in users if i in kept]
    instructions = []
    for kind in _INSTRUCTIONS:  # only the newest of each: an older plan is superseded
        candidates = [i for i in carried if i in by_id and by_id[i].node_type is kind]
        candidates += [n.node_id for n in covered if n.node_type is kind]
        if candidates:
            instructions.append(candidates[-1])
    return users + instructions


class Appender(Protocol):
    """Stores a node after the path's last one (the loop's ``_append``)."""

    def __call__(
        self,
        nodes: list[Node],
        role: Role,
        blocks: list[ContentBlock],
        *,
        node_type: NodeType = ...,
        metadata: dict[str, Any] | None = ...,
    ) -> Awaitable[Node]: ...


EventWriter = Callable[..., Awaitable[None]]


class CompactAgents(Protocol):
    """Records each summarizer as an agent of purpose ``compact`` (the run-worker's writes)."""

    async def start(self, metadata: dict[str, Any]) -> str:
        """Create the compact agent; its id."""
        ...

    async def finish(self, agent_id: str, *, ok: bool, result: dict[str, Any]) -> None:
        """End it: ``ok`` when it wrote the summary."""
        ...


class Compactor:
    """Decides when to compact and writes compaction nodes for one run (see the module doc)."""

    def __init__(
        self, config: AgentConfig, model: ProviderAdapter, agents: CompactAgents | None = None
    ) -> None:
        self.policy = config.context
        self.summarizer = Summarizer(model, config.context, config.model)
        self.agents = agents
        self.count = 0

    @staticmethod
    def over(report: ContextBuildReport) -> bool:
        """Whether the context just built passed its compaction threshold."""
        budget = report.budget
        return budget is not None and budget.total > budget.compact_at

    async def compact(
        self,
        nodes: list[Node],
        report: ContextBuildReport,
        *,
        append: Appender,
        event: EventWriter,
        trigger: str,
        before: Callable[[Sequence[Node]], Awaitable[None]] | None = None,
    ) -> Node | None:
        """Cover the older part of ``nodes`` with a compaction node appended to them; ``None``
        when there is nothing left to cover (the newest turn alone is kept). ``before`` is told
        first, once there is something to compact (the PreCompact hooks)."""
        budget = report.budget
        assert budget is not None
        self.summarizer.fit(budget.context_window, budget.input_budget)
        chosen = self._choose(nodes, budget.input_budget, budget.ratio, trigger)
        if chosen is None:
            return None
        if before is not None:
            await before(nodes)
        self.summarizer.usage = Usage()  # this compaction's own (its budget is not the run's)
        agent_id = None
        if self.agents is not None:
            agent_id = await self.agents.start(
                {"model": self.summarizer.model_name, "covers_through": chosen.covers_through}
            )
        summary, failure = await self._summary(chosen)
        method = "trim" if failure else "summary"
        metadata: dict[str, Any] = {
            "purpose": "compact",
            "method": method,
            "trigger": trigger,
            "covers_through": chosen.covers_through,
            "covered": chosen.previous_count + len(chosen.covered),
            "pinned": chosen.pinned,
            "model": self.summarizer.model_name,
            "tokens_before": budget.total,
            "usage": self.summarizer.usage.model_dump(),
        }
        if failure:
            metadata["failure"] = failure
        if agent_id is not None:
            metadata["compact_agent_id"] = agent_id
        node = await append(
            nodes,
            Role.SYSTEM,
            [TextBlock(text=summary)],
            node_type=NodeType.COMPACTION,
            metadata=metadata,
        )
        self.count += 1
        if self.agents is not None and agent_id is not None:
            result = {
                "node_id": node.node_id,
                "method": method,
                "failure": failure,
                "usage": self.summarizer.usage,
            }
            await self.agents.finish(agent_id, ok=failure is None, result=result)
        await event(
            EventType.CONTEXT_COMPACTED,
            level=EventLevel.WARNING if failure else EventLevel.INFO,
            node_id=node.node_id,
            payload={
                "method": method,
                "trigger": trigger,
                "failure": failure,
                "covered": len(chosen.covered),
                "covers_through": chosen.covers_through,
                "pinned": len(chosen.pinned),
                "tokens_before": budget.total,
                "summary_tokens": estimate_text(summary),
            },
        )
        return node

    def _choose(
        self, nodes: list[Node], input_budget: int, ratio: float, trigger: str
    ) -> CompactionPlan | None:
        """What to cover. Past the threshold, only history beyond the newest ``keep`` tokens is
        worth covering (a context full of tool definitions is not helped by summarizing two
        messages); an overflow may cover all but the newest turn, a manual compaction everything
        before it."""
        keep = int(input_budget * self.policy.keep_recent / ratio)
        pins = int(input_budget * PIN_SHARE / ratio)
        if trigger == "manual":
            return plan(nodes, 0, pins)
        if trigger == "threshold":
            return plan(nodes, keep, pins)
        return plan(nodes, keep, pins) or plan(nodes, 0, pins)

    async def _summary(self, chosen: CompactionPlan) -> tuple[str, str | None]:
        """The summary of what ``chosen`` covers, and ``None``; or, when the summarizer fails
        in any way (the run goes on, trimmed), the earlier summary with a note, and why."""
        try:
            async with asyncio.timeout(self.policy.summary_timeout_s):
                return await self.summarizer.summarize(chosen.previous, chosen.covered), None
        except SummaryFailed as exc:
            failure = exc.reason
        except TimeoutError:
            failure = "timeout"
        except Exception:  # whatever breaks the summarizer, the run goes on, trimmed
            failure = "error"
        note = (
            f"[{len(chosen.covered)} older messages were left out of the context: they could "
            f"not be summarized ({failure}). They are kept in the session's history.]"
        )
        return (f"{chosen.previous}\n\n{note}" if chosen.previous else note), failure
