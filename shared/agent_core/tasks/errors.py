"""Errors of the Task DAG domain: a refused command, and a WAL that cannot be trusted.

Hierarchy::

    AgentCoreError
    ├── TaskRuleError            a command (or a replayed record) breaks a DAG rule; nothing changed
    └── SchemaError
        └── TaskWalCorruptError  a WAL record before the last line is unreadable or inconsistent

Both carry a stable ``code`` and ``details`` naming the task, list or WAL line, so task tools can
report them to the model as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from agent_core.errors import AgentCoreError, SchemaError

__all__ = ["TaskErrorCode", "TaskRuleError", "TaskWalCorruptError", "WalFault"]


class TaskErrorCode(StrEnum):
    """Why a command was refused."""

    LIST_EXISTS = "task_list_exists"
    LIST_NOT_FOUND = "task_list_not_found"
    LIST_MISMATCH = "task_list_mismatch"
    TASK_EXISTS = "task_exists"
    TASK_NOT_FOUND = "task_not_found"
    DEPENDENCY_NOT_FOUND = "task_dependency_not_found"
    SELF_DEPENDENCY = "task_self_dependency"
    DUPLICATE_DEPENDENCY = "task_duplicate_dependency"
    CYCLE = "task_dependency_cycle"
    INVALID_TRANSITION = "task_invalid_transition"
    NOT_CLAIMANT = "task_not_claimant"
    ALREADY_CLAIMED = "task_already_claimed"
    BLOCKED = "task_blocked"
    NOT_PENDING = "task_not_pending"
    EMPTY_UPDATE = "task_empty_update"
    SEQ_MISMATCH = "task_seq_mismatch"


class TaskRuleError(AgentCoreError):
    """A command breaks a Task DAG rule; the DAG is unchanged."""

    error_type = "task_error"

    def __init__(
        self, code: TaskErrorCode, message: str, *, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(str(code), message, details=details)
        self.task_code = code


class WalFault(StrEnum):
    """Why a WAL line could not be applied."""

    UNPARSABLE = "unparsable"  # not UTF-8 / not JSON
    MALFORMED = "malformed"  # JSON, but not an object with a string checksum
    CHECKSUM_MISMATCH = "checksum_mismatch"
    INVALID_RECORD = "invalid_record"  # checksum fine, schema validation failed
    SEQ_GAP = "seq_gap"
    RULE_VIOLATION = "rule_violation"  # well-formed record the DAG rules refuse


class TaskWalCorruptError(SchemaError):
    """A Task WAL cannot be replayed: the DAG of that list is unavailable until it is repaired."""

    def __init__(self, *, line: int, offset: int, fault: WalFault, reason: str) -> None:
        super().__init__(
            "task_wal_corrupt",
            f"task WAL record on line {line} (byte {offset}) is corrupt ({fault}): {reason}; "
            "this task list is unavailable until the file is repaired",
            details={"line": line, "offset": offset, "fault": str(fault), "reason": reason},
        )
        self.line = line
        self.offset = offset
        self.fault = fault
        self.reason = reason
