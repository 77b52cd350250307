"""The bounded map of the caches (``agent_core.recent``)."""

from __future__ import annotations

import pytest

from agent_core.recent import Recent


def test_the_least_recently_used_key_is_dropped_past_the_bound() -> None:
    held: Recent[str, int] = Recent(2)
    held.put("a", 1)
    held.put("b", 2)
    assert held.get("a") == 1  # "b" is now the least recent
    held.put("c", 3)
    assert held.keys() == ["a", "c"] and "b" not in held and held.get("b") is None
    held.put("a", 4)  # a put makes its key the most recent too
    held.put("d", 5)
    assert held.keys() == ["a", "d"] and len(held) == 2
    assert held.pop("a") == 4 and held.pop("a") is None and held.keys() == ["d"]


def test_a_map_that_could_hold_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Recent[str, int](0)
