"""Task WAL line codec: canonical JSON, CRC-32 checksum, encode and decode one record.

A line is the compact, ASCII-only JSON of a :class:`TaskWalEvent` followed by ``\\n``. The
checksum is the CRC-32 of the canonical JSON (sorted keys, compact, ASCII) of the record *without*
its ``checksum`` key, re-derived from the parsed object on decode, so it checks the values that will
be applied rather than the bytes' formatting. ASCII-only output (every non-ASCII character escaped)
leaves no room for encoding trouble and no raw line separator inside a record.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from agent_core.tasks.errors import WalFault
from agent_core.types.tasks import TaskChange, TaskWalEvent

__all__ = [
    "WalRecordError",
    "canonical_json",
    "checksum_of",
    "decode_record",
    "encode_record",
    "seal",
]


class WalRecordError(ValueError):
    """One WAL line could not be decoded; ``fault`` says how."""

    def __init__(self, fault: WalFault, reason: str) -> None:
        super().__init__(f"{fault}: {reason}")
        self.fault = fault
        self.reason = reason


def canonical_json(obj: object) -> bytes:
    """The canonical JSON bytes of a JSON-compatible value: sorted keys, compact, ASCII."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def checksum_of(body: Mapping[str, Any]) -> str:
    """CRC-32 (8 lowercase hex digits) of the canonical JSON of ``body``."""
    return f"{zlib.crc32(canonical_json(body)):08x}"


def _body(event_seq: int, ts: datetime, payload: TaskChange) -> dict[str, Any]:
    # Dump through a provisional event so the body is exactly what encode_record will write.
    draft = TaskWalEvent(seq=event_seq, ts=ts, payload=payload, checksum="0" * 8)
    return draft.model_dump(mode="json", exclude={"checksum"})


def seal(seq: int, ts: datetime, payload: TaskChange) -> TaskWalEvent:
    """A WAL record with its checksum computed. ``ts`` must be timezone-aware."""
    return TaskWalEvent(
        seq=seq, ts=ts, payload=payload, checksum=checksum_of(_body(seq, ts, payload))
    )


def encode_record(event: TaskWalEvent) -> bytes:
    """One WAL line (canonical JSON + ``\\n``) of a sealed record.

    Raises ``ValueError`` if the record's checksum does not match its content: a record that was
    not built by :func:`seal` must not reach the file, where it would read as corruption.
    """
    body = event.model_dump(mode="json", exclude={"checksum"})
    if checksum_of(body) != event.checksum:
        raise ValueError(f"record seq={event.seq} has a checksum that does not match its content")
    # The line itself reads seq, ts, payload (kind first), checksum for people tailing the file;
    # only the checksum input has to be canonical.
    payload = body["payload"]
    line = {"seq": body["seq"], "ts": body["ts"], "payload": {"kind": payload["kind"], **payload}}
    line["checksum"] = event.checksum
    text = json.dumps(line, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text.encode("ascii") + b"\n"


def decode_record(line: bytes) -> TaskWalEvent:
    """Decode one WAL line (without its ``\\n``) into a record, or raise :class:`WalRecordError`."""
    try:
        obj = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # bad UTF-8/JSON, huge ints, absurd nesting
        raise WalRecordError(WalFault.UNPARSABLE, str(exc)[:200]) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("checksum"), str):
        raise WalRecordError(WalFault.MALFORMED, "not a JSON object with a string checksum")
    stored = obj.pop("checksum")
    try:
        actual = checksum_of(obj)
    except (ValueError, RecursionError) as exc:  # NaN/Infinity are not canonical JSON
        raise WalRecordError(WalFault.MALFORMED, str(exc)[:200]) from None
    if actual != stored:
        raise WalRecordError(
            WalFault.CHECKSUM_MISMATCH, f"stored checksum {stored[:16]!r}, content has {actual!r}"
        )
    try:
        return TaskWalEvent.model_validate({**obj, "checksum": stored})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise WalRecordError(WalFault.INVALID_RECORD, f"{where}: {first['msg']}") from None
