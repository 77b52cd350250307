"""Replay: clean WALs, torn tails, and corruption that names its line."""

from __future__ import annotations

import pytest

from agent_core.tasks.codec import canonical_json, checksum_of, encode_record, seal
from agent_core.tasks.errors import TaskWalCorruptError, WalFault
from agent_core.tasks.wal import ReplayStatus, replay
from agent_core.types.task_commands import AddTask, ClaimTask, CompleteTask, CreateList
from agent_core.types.tasks import TaskClaimed
from tests.unit.tasks.support import ALICE, T0, Board


def sample() -> tuple[Board, list[bytes]]:
    board = Board()
    board.do(CreateList)
    board.do(AddTask, task_id="task_a", title="first")
    board.do(AddTask, task_id="task_b", title="second", dependencies=("task_a",))
    board.do(ClaimTask, task_id="task_a")
    board.do(CompleteTask, task_id="task_a", note="done")
    return board, [encode_record(e) for e in board.events]


def test_clean_replay_rebuilds_the_dag() -> None:
    board, lines = sample()
    data = b"".join(lines)
    result = replay(data)
    assert result.status is ReplayStatus.CLEAN
    assert (result.records, result.valid_length, result.torn_bytes) == (5, len(data), 0)
    assert result.dag == board.dag
    assert result.dag_or_raise() == board.dag


def test_empty_wal_has_no_dag() -> None:
    result = replay(b"")
    assert (result.status, result.dag, result.records, result.valid_length) == (
        ReplayStatus.CLEAN,
        None,
        0,
        0,
    )


def test_final_line_without_newline_is_torn() -> None:
    board, lines = sample()
    good = b"".join(lines[:-1])
    result = replay(good + lines[-1][:-1])  # complete JSON, but the newline never made it
    assert result.status is ReplayStatus.TORN_TAIL
    assert (result.records, result.valid_length, result.torn_bytes) == (
        4,
        len(good),
        len(lines[-1]) - 1,
    )
    assert result.dag is not None and result.dag.seq == 4


def test_unparsable_final_line_is_torn() -> None:
    _, lines = sample()
    good = b"".join(lines[:3])
    result = replay(good + b"\x00\x00\x00\n")
    assert (result.status, result.records, result.valid_length) == (
        ReplayStatus.TORN_TAIL,
        3,
        len(good),
    )


def test_lost_newline_between_the_last_two_records_is_corruption_not_a_torn_write() -> None:
    # Damage turned the newline after record 4 into another byte: the final line now holds two
    # records and parses as neither. A torn append holds one record's prefix, never two records.
    _, lines = sample()
    merged = lines[-2][:-1] + b"\x00" + lines[-1]
    result = replay(b"".join(lines[:-2]) + merged)
    assert result.status is ReplayStatus.CORRUPT
    assert result.corruption is not None and result.corruption.fault is WalFault.UNPARSABLE
    assert result.corruption.line == 4


def test_truncated_file_is_appendable_again() -> None:
    board, lines = sample()
    torn = b"".join(lines) + lines[0][:20]
    result = replay(torn)
    assert result.dag == board.dag
    board.do(AddTask, task_id="task_c", title="after the crash")
    repaired = torn[: result.valid_length] + encode_record(board.events[-1])
    again = replay(repaired)
    assert again.status is ReplayStatus.CLEAN and again.dag == board.dag


def test_final_line_with_bad_checksum_is_corruption_not_a_torn_write() -> None:
    _, lines = sample()
    last = lines[-1].replace(b"done", b"dune")
    result = replay(b"".join(lines[:-1]) + last)
    assert result.status is ReplayStatus.CORRUPT
    assert result.corruption is not None and result.corruption.fault is WalFault.CHECKSUM_MISMATCH


@pytest.mark.parametrize(
    ("damage", "fault"),
    [
        (lambda line: line.replace(b"second", b"secund"), WalFault.CHECKSUM_MISMATCH),
        (lambda line: line[:30] + b"\n", WalFault.UNPARSABLE),
        (lambda line: b"\n", WalFault.UNPARSABLE),
        (lambda line: b"[]\n", WalFault.MALFORMED),
    ],
)
def test_bad_middle_line_makes_the_list_unavailable(damage: object, fault: WalFault) -> None:
    _, lines = sample()
    assert callable(damage)
    lines[2] = damage(lines[2])
    result = replay(b"".join(lines))
    assert result.status is ReplayStatus.CORRUPT and result.dag is None
    error = result.corruption
    assert error is not None
    assert (error.line, error.offset, error.fault) == (3, len(lines[0]) + len(lines[1]), fault)
    assert "line 3" in error.message and error.details["line"] == 3
    with pytest.raises(TaskWalCorruptError):
        result.dag_or_raise()


def test_sequence_gap_is_corruption() -> None:
    _, lines = sample()
    result = replay(b"".join(lines[:2] + lines[3:]))
    assert result.corruption is not None
    assert (result.corruption.line, result.corruption.fault) == (3, WalFault.SEQ_GAP)


def test_well_formed_record_breaking_a_rule_is_corruption() -> None:
    _, lines = sample()
    rogue = encode_record(seal(6, T0, TaskClaimed(task_id="task_zzz", agent_id=ALICE)))
    result = replay(b"".join(lines) + rogue)
    assert result.corruption is not None
    assert (result.corruption.line, result.corruption.fault) == (6, WalFault.RULE_VIOLATION)
    assert "task_zzz" in result.corruption.reason


def test_well_checksummed_record_with_bad_schema_is_corruption() -> None:
    _, lines = sample()
    body = {"seq": 6, "ts": "2026-01-01T00:00:00Z", "payload": {"kind": "task_exploded"}}
    bad = canonical_json({**body, "checksum": checksum_of(body)}) + b"\n"
    result = replay(b"".join(lines) + bad + lines[0])
    assert result.corruption is not None
    assert (result.corruption.line, result.corruption.fault) == (6, WalFault.INVALID_RECORD)
