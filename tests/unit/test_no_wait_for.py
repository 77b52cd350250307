"""No code outside the tests calls ``asyncio.wait_for``.

On Python 3.11 ``wait_for`` returns the awaited result and drops a cancel that lands as the
awaited call completes: the task then goes on as if nobody had cancelled it (a lease heartbeat
renewed forever, a run that would not stop, a flaky test). ``async with asyncio.timeout(...)``
hands the cancel on. ruff bans the name (TID251), but the services are exempt from that rule
(they may import one another), so this reads the syntax tree of every module of the library, the
services and the benchmarks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_asyncio_wait_for_is_called_nowhere() -> None:
    found: list[str] = []
    paths = [p for d in ("shared", "services", "bench") for p in (ROOT / d).rglob("*.py")]
    assert len(paths) > 200
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
