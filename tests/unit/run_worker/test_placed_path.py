"""Where a message placed by its run's claim sits, from the path read beside the claim."""

from __future__ import annotations

from agent_core.types.enums import Role
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import Node
from services.run_worker.claim import placed_path


def _node(node_id: str, parent_id: str | None) -> Node:
    return Node(
        node_id=node_id,
        parent_id=parent_id,
        agent_id="agent_1",
        role=Role.USER,
        content=[TextBlock(text=node_id)],
    )


def test_the_path_read_before_the_claim_ends_at_the_parent() -> None:
    a, b = _node("node_a", None), _node("node_b", "node_a")
    message = _node("node_m", "node_b")
    assert placed_path([a, b], message) == [a, b, message]


def test_the_path_read_after_the_claim_already_ends_at_the_message() -> None:
    a, message = _node("node_a", None), _node("node_m", "node_a")
    assert placed_path([a, message], message) == [a, message]


def test_a_first_message_has_an_empty_path_above_it() -> None:
    message = _node("node_m", None)
    assert placed_path([], message) == [message]


def test_an_active_node_that_moved_in_between_asks_for_a_fresh_read() -> None:
    a, b = _node("node_a", None), _node("node_b", "node_a")
    assert placed_path([a, b], _node("node_m", "node_a")) is None
    assert placed_path([], _node("node_m", "node_a")) is None
