"""No code calls ``asyncio.wait_for``: not the library, the services, the benchmarks, nor the tests.

On Python 3.11 ``wait_for`` returns the awaited result and drops a cancel that lands as the
awaited call completes: the task then goes on as if nobody had cancelled it (a lease heartbeat
renewed forever, a run that would not stop, a flaky test). ``async with asyncio.timeout(...)``
hands the cancel on. ruff bans the name (TID251), but the services and the tests are exempt from
that rule (they may import one another), so this reads the syntax tree of every module of the
library, the services, the benchmarks and the tests. In a test the same cancel lost as a wait ends
leaves a task running into the next test.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_asyncio_wait_for_is_called_nowhere() -> None:
    found: list[str] = []
    dirs = ("shared", "services", "bench", "tests")
    paths = [p for d in dirs for p in (ROOT / d).rglob("*.py")]
    assert len(paths) > 400
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "wait_for"
                and isinstance(node.value, ast.Name)
                and node.value.id == "asyncio"
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
