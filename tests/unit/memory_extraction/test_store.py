"""The file store: atomic writes, ETags, path safety, a change log that never holds a secret."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_core.errors import SchemaError
from services.memory_extraction.store import ChangeRecord, MemoryStore, Source, etag_of

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_write_is_atomic_and_the_etag_is_the_content_hash(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    tag = store.write("acme", "skill:report", "- 结论放最前\n")
    path = tmp_path / "accounts" / "acme" / "memory" / "skills" / "report.md"
    assert path.read_text() == "- 结论放最前\n"
    assert tag == etag_of(path.read_bytes()) != etag_of(b"other")
    assert [p.name for p in path.parent.iterdir()] == ["report.md"]  # no temp file left
    assert store.scopes("acme") == ["skill:report"]
    assert etag_of(None) is None


@pytest.mark.parametrize("account", ["../x", "a/b", "", "a b"])
def test_account_ids_cannot_leave_the_home(tmp_path: Path, account: str) -> None:
    with pytest.raises(SchemaError):
        MemoryStore(tmp_path).path(account, "user")


def test_unparseable_files_are_marked_broken_not_dropped(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.write("acme", "user", "---\n: [unclosed\n---\n- x\n")
    snap = store.load("acme")
    assert snap.broken == {"user"} and "user" not in snap.documents
    assert snap.etags["user"] is not None


def test_change_log_masks_secrets_and_keeps_provenance(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    record = ChangeRecord(
        ts=NOW, scope="user", op="update", mode="api", entry_id="u1",
        old_text="卡号 4111 1111 1111 1111，手机 13812345678",
        new_text="key sk-abcdefghijklmnopqrstuvwx123456",
        sources=[Source(session_id="sess_1", run_id="run_1")],
    )  # fmt: skip
    store.append_log("acme", [record])
    raw = (tmp_path / "accounts" / "acme" / "memory" / "changes.jsonl").read_text()
    for secret in ("4111 1111 1111 1111", "13812345678", "sk-abcdefghijklmnopqrstuvwx123456"):
        assert secret not in raw
    (logged,) = store.read_log("acme")
    assert logged["sources"] == [{"session_id": "sess_1", "run_id": "run_1"}]
    assert logged["op"] == "update" and logged["entry_id"] == "u1"
