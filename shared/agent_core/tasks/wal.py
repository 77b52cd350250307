"""Replay a Task WAL from its bytes: rebuild the DAG, find a torn tail, or name the corrupt line.

Pure over bytes; reading, truncating and appending the file is the task-wal service's job.

- Every complete line (ending in ``\\n``) is decoded, checked (checksum, schema, ``seq`` = previous
  + 1) and applied through the same rules as live commands.
- A final segment without ``\\n``, or a final line that is not even JSON, is what a crash in the
  middle of an append leaves: it was never acknowledged, so it is dropped and reported;
  ``valid_length`` is where the file must be truncated before the next append.
- Any other bad line (including a final line that *is* JSON but fails its checksum — bit rot, not a
  torn write) makes the list unavailable: ``corruption`` names the line, and ``dag`` is ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agent_core.tasks.codec import WalRecordError, decode_record
from agent_core.tasks.errors import TaskRuleError, TaskWalCorruptError, WalFault
from agent_core.tasks.rules import evolve
from agent_core.types.tasks import TaskDAG

__all__ = ["ReplayResult", "ReplayStatus", "replay"]

_RECORD_START = b'{"seq":'  # every line begins so (see codec.encode_record)


class ReplayStatus(StrEnum):
    """How a replay ended."""

    CLEAN = "clean"  # every byte belongs to a complete, valid record (or the WAL is empty)
    TORN_TAIL = "torn_tail"  # a partial final record was dropped; truncate at valid_length
    CORRUPT = "corrupt"  # a bad record that cannot be a torn append; the list is unavailable


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The outcome of :func:`replay`.

    ``records`` counts the complete records applied; ``valid_length`` is the byte length of those
    records (the offset to truncate at before appending); ``torn_bytes`` is the length of the
    dropped tail. On corruption ``dag`` is ``None`` and ``corruption`` says where and why.
    """

    dag: TaskDAG | None
    records: int
    valid_length: int
    torn_bytes: int = 0
    corruption: TaskWalCorruptError | None = None

    @property
    def status(self) -> ReplayStatus:
        """Clean, torn tail, or corrupt."""
        if self.corruption is not None:
            return ReplayStatus.CORRUPT
        return ReplayStatus.TORN_TAIL if self.torn_bytes else ReplayStatus.CLEAN

    def dag_or_raise(self) -> TaskDAG | None:
        """The DAG (``None`` for an empty WAL); raise the corruption error if there is one."""
        if self.corruption is not None:
            raise self.corruption
        return self.dag


def replay(data: bytes) -> ReplayResult:
    """Rebuild a DAG from the full contents of a ``.wal.jsonl`` file. Never raises on bad data."""
    dag: TaskDAG | None = None
    pos = records = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end == -1:  # no newline: the append was cut short
            return ReplayResult(dag, records, pos, torn_bytes=len(data) - pos)
        line_no = records + 1
        try:
            event = decode_record(data[pos:end])
        except WalRecordError as exc:
            if _torn(data, pos, end, exc):
                return ReplayResult(dag, records, pos, torn_bytes=len(data) - pos)
            return _corrupt(records, pos, line_no, exc.fault, exc.reason)
        expected = records + 1
        if event.seq != expected:
            reason = f"seq {event.seq} where {expected} was expected"
            return _corrupt(records, pos, line_no, WalFault.SEQ_GAP, reason)
        try:
            dag = evolve(dag, event, in_place=True)  # the replay's own DAG: no copy a record
        except TaskRuleError as exc:
            return _corrupt(records, pos, line_no, WalFault.RULE_VIOLATION, exc.message)
        records += 1
        pos = end + 1
    return ReplayResult(dag, records, pos)


def _torn(data: bytes, pos: int, end: int, exc: WalRecordError) -> bool:
    """Whether the bad line ``data[pos:end]`` reads as a torn append rather than damage.

    Only the final line can be torn, and only into something that is not JSON. A torn append is
    (a prefix of) one record, so a final line holding the start of a second record lost the
    newline between two acknowledged records to damage: that is corruption, not a torn write.
    """
    if end + 1 != len(data) or exc.fault is not WalFault.UNPARSABLE:
        return False
    return data.find(_RECORD_START, pos + 1, end) == -1


def _corrupt(records: int, pos: int, line: int, fault: WalFault, reason: str) -> ReplayResult:
    error = TaskWalCorruptError(line=line, offset=pos, fault=fault, reason=reason)
    return ReplayResult(None, records, pos, corruption=error)
