"""The public surface of agent_core.tasks is pinned: every exported name exists."""

from __future__ import annotations

import importlib

import pytest

import agent_core.tasks

MODULES = [
    "agent_core.tasks",
    *(f"agent_core.tasks.{m}" for m in ("codec", "dag", "errors", "names", "rules", "wal")),
    "agent_core.types.tasks",  # the task models and commands, with the other shared types
    "agent_core.types.task_commands",
]


@pytest.mark.parametrize("module", MODULES)
def test_every_exported_name_exists(module: str) -> None:
    mod = importlib.import_module(module)
    assert mod.__all__, module
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert missing == []


def test_package_surface_is_pinned() -> None:
    assert set(agent_core.tasks.__all__) == {
        "TASK_COMMAND", "Applied", "ReplayResult", "ReplayStatus", "Task", "TaskCommand",
        "TaskDAG", "TaskErrorCode", "TaskRuleError", "TaskStatus", "TaskWalCorruptError",
        "TaskWalEvent", "WalFault", "apply", "blocked_ids", "decode_record", "encode_record",
        "evolve", "list_file_name", "list_file_stem", "ready_ids", "replay", "seal",
    }  # fmt: skip
