"""Every timeline event type has a writer: no member of ``EventType`` is a promise nobody keeps.

A static check over the code that writes (the storage-writer, the run-worker and the library),
beside the real run of ``tests/e2e/gateway/test_timeline.py`` that stores every type."""

from __future__ import annotations

import ast
from pathlib import Path

from agent_core.types.enums import RUN_END_EVENTS, EventType

ROOT = Path(__file__).resolve().parents[3]
# The gateway reads the timeline and builds examples of it; it writes none of it.
_READERS = ("services/gateway/", "shared/agent_core/types/enums.py", "shared/soong_agent/")


def _written() -> set[EventType]:
    """Members named as ``EventType.X`` by the code that writes, and the terminal events the
    end of a run writes (``RUN_END_EVENTS``, looked up by the writer's ``end_run``)."""
    named: set[EventType] = set()
    for folder in ("services", "shared"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(_READERS):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "EventType"
                    and node.attr in EventType.__members__
                ):
                    named.add(EventType[node.attr])
    end = (ROOT / "services/storage_writer/apply_end.py").read_text(encoding="utf-8")
    if "RUN_END_EVENTS[" in end:
        named |= set(RUN_END_EVENTS.values())
    return named


def test_every_event_type_of_the_enum_has_a_writer() -> None:
    assert set(EventType) - _written() == set()
