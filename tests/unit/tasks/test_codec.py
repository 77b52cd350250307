"""One WAL line: encode, decode, and every way a line can be bad."""

from __future__ import annotations

import json

import pytest

from agent_core.tasks.codec import (
    WalRecordError,
    canonical_json,
    checksum_of,
    decode_record,
    encode_record,
    seal,
)
from agent_core.tasks.errors import WalFault
from agent_core.types.tasks import TaskAdded, TaskWalEvent
from tests.unit.tasks.support import ALICE, T0

ODD_TEXT = 'Café 设计 \u2028 "quoted" \n tab\t \x00 nul 🙂'


def record(title: str = "Write the spec") -> TaskWalEvent:
    return seal(7, T0, TaskAdded(task_id="task_a", title=title, dependencies=(), agent_id=ALICE))


def fault_of(line: bytes) -> WalFault:
    with pytest.raises(WalRecordError) as info:
        decode_record(line)
    return info.value.fault


def test_round_trip_is_exact_even_for_odd_text() -> None:
    event = record(ODD_TEXT)
    line = encode_record(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line.isascii()
    assert decode_record(line[:-1]) == event


def test_line_reads_seq_first_and_checksum_last() -> None:
    text = encode_record(record()).decode()
    assert text.startswith('{"seq":7,"ts":"2026-01-01T12:00:00Z","payload":{"kind":"task_added"')
    assert text.rstrip().endswith(f'"checksum":"{record().checksum}"}}')


def test_checksum_covers_the_record_without_checksum() -> None:
    event = record()
    body = json.loads(encode_record(event))
    del body["checksum"]
    assert event.checksum == checksum_of(body)
    assert canonical_json({"b": 1, "a": [1, "é"]}) == b'{"a":[1,"\\u00e9"],"b":1}'


def test_changed_value_is_a_checksum_mismatch() -> None:
    line = encode_record(record("Write the spec"))[:-1]
    assert fault_of(line.replace(b"Write", b"Wrote")) is WalFault.CHECKSUM_MISMATCH
    assert fault_of(line.replace(b'"seq":7', b'"seq":8')) is WalFault.CHECKSUM_MISMATCH


@pytest.mark.parametrize(
    ("line", "fault"),
    [
        (b'{"seq":1,"ts":', WalFault.UNPARSABLE),
        (b"\xff\xfe{}", WalFault.UNPARSABLE),
        (b"\x00\x00\x00\x00", WalFault.UNPARSABLE),
        (b"", WalFault.UNPARSABLE),
        (b"[" * 100_000, WalFault.UNPARSABLE),
        (b"[1,2]", WalFault.MALFORMED),
        (b'{"seq":1}', WalFault.MALFORMED),
        (b'{"seq":NaN,"checksum":"00000000"}', WalFault.MALFORMED),
    ],
)
def test_bad_lines_are_classified(line: bytes, fault: WalFault) -> None:
    assert fault_of(line) is fault


def test_well_checksummed_record_with_bad_schema_is_invalid() -> None:
    body = {"seq": 1, "ts": "2026-01-01T00:00:00Z", "payload": {"kind": "task_exploded"}}
    line = canonical_json({**body, "checksum": checksum_of(body)})
    assert fault_of(line) is WalFault.INVALID_RECORD


def test_encode_refuses_an_unsealed_record() -> None:
    forged = record().model_copy(update={"checksum": "00000000"})
    with pytest.raises(ValueError, match="checksum"):
        encode_record(forged)
