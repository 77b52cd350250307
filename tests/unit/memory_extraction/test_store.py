"""The memory store on the home's folders: atomic writes, ETags, key safety, a change log that
never holds a secret (both engines: tests/integration/memory_extraction)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_core.errors import SchemaError
from services.memory_extraction.store import ChangeRecord, MemoryStore, Source, etag_of

NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def test_write_is_atomic_and_the_etag_is_the_content_hash(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    tag, _ = await store.write("acme", "skill:report", "- 结论放最前\n", version=None)
    path = tmp_path / "accounts" / "acme" / "memory" / "skills" / "report.md"
    assert path.read_text() == "- 结论放最前\n"
    assert tag == etag_of(path.read_bytes()) != etag_of(b"other")
    assert [p.name for p in path.parent.iterdir()] == ["report.md"]  # no temp file left
    assert await store.scopes("acme") == ["skill:report"]
    assert etag_of(None) is None


@pytest.mark.parametrize("account", ["../x", "a/b", "", "a b"])
def test_account_ids_cannot_leave_the_home(tmp_path: Path, account: str) -> None:
    with pytest.raises(SchemaError):
        MemoryStore(tmp_path).key(account, "user")


async def test_unparseable_files_are_marked_broken_not_dropped(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    await store.write("acme", "user", "---\n: [unclosed\n---\n- x\n", version=None)
    snap = await store.load("acme")
    assert snap.broken == {"user"} and "user" not in snap.documents
    assert snap.etags["user"] is not None


async def test_change_log_masks_secrets_and_keeps_provenance(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    record = ChangeRecord(
        ts=NOW, scope="user", op="update", mode="api", entry_id="u1",
        old_text="卡号 4111 1111 1111 1111，手机 13812345678",
        new_text="key sk-abcdefghijklmnopqrstuvwx123456",
        sources=[Source(session_id="sess_1", run_id="run_1")],
    )  # fmt: skip
    await store.append_log("acme", [record])
    raw = (tmp_path / "accounts" / "acme" / "memory" / "changes.jsonl").read_text()
    for secret in ("4111 1111 1111 1111", "13812345678", "sk-abcdefghijklmnopqrstuvwx123456"):
        assert secret not in raw
    (logged,) = await store.read_log("acme")
    assert logged["sources"] == [{"session_id": "sess_1", "run_id": "run_1"}]
    assert logged["op"] == "update" and logged["entry_id"] == "u1"
