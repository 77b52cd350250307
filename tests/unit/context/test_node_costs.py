"""Nodes written without an estimate (older rows, imported sessions) are estimated once per node
object, and a compaction plan prices only what it needs: a 2,500-node history's first compaction
used to estimate every node three times over on the worker's loop (a CPU-second, several on a
loaded host)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

import agent_core.context.compaction as compaction
import agent_core.context.tokens as tokens
from agent_core.context.compaction import plan
from agent_core.types.enums import Role
from agent_core.types.protocol import ContentBlock, TextBlock
from agent_core.types.runtime import Node

NODES = 2500


def _history(count: int) -> list[Node]:
    nodes: list[Node] = []
    parent = None
    for i in range(count):
        words = f"message {i}: " + " ".join(f"w{i}-{k}" for k in range(12 + i % 20))
        node = Node(
            node_id=f"node_{i:016x}",
            parent_id=parent,
            agent_id="agent_0000000000000000",
            role=Role.USER if i % 2 == 0 else Role.ASSISTANT,
            content=[TextBlock(text=words)],
        )
        parent = node.node_id
        nodes.append(node)
    return nodes


@pytest.fixture
def estimated(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many nodes' contents were estimated (wherever the estimate is called from)."""
    calls: list[int] = []
    real = tokens.estimate_blocks

    def counting(blocks: Sequence[ContentBlock]) -> int:
        calls.append(1)
        return real(blocks)

    monkeypatch.setattr(tokens, "estimate_blocks", counting)
    monkeypatch.setattr(compaction, "estimate_blocks", counting, raising=False)
    yield calls


def test_a_plan_over_a_long_unestimated_history_prices_only_what_it_keeps(
    estimated: list[int],
) -> None:
    history = _history(NODES)
    chosen = plan(history, keep=2000, pin_budget=3000)
    assert chosen is not None and len(chosen.covered) > 2000
    assert chosen.pinned  # the newest short user messages are still pinned
    assert len(estimated) < 100  # the kept tail and the pins, not 2,500 nodes (3,750 before)


def test_a_node_object_is_estimated_once(estimated: list[int]) -> None:
    node_tokens = tokens.node_tokens
    history = _history(3)
    first = [node_tokens(n) for n in history]
    assert [node_tokens(n) for n in history] == first
    assert len(estimated) == 3
    # The same id in a new object (a node read again) is estimated again, not trusted blindly.
    again = history[0].model_copy()
    assert node_tokens(again) == first[0] and len(estimated) == 4
    recorded = history[1].model_copy(update={"token_count": 7})
    assert node_tokens(recorded) == 7 and len(estimated) == 4  # a recorded estimate is used
