"""The update schema and its guards: no duplicates, replace in place, refuse the invalid."""

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from agent_core.memory import (
    MemoryEntry,
    MemoryUpdate,
    MemoryUpdateBatch,
    UpdateOp,
    apply_updates,
    new_document,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _docs() -> dict[str, object]:
    doc = new_document("user")
    doc.entries.append(MemoryEntry(id="u1", text="日期用 YYYY/MM/DD", slot="date_format=ymd_slash"))
    return {"user": doc}


@pytest.mark.parametrize(
    "fields",
    [
        {"op": "add", "scope": "user"},
        {"op": "update", "scope": "user", "text": "x"},
        {"op": "delete", "scope": "user"},
        {"op": "add", "scope": "team", "text": "x"},
        {"op": "add", "scope": "user", "text": "x", "extra": 1},
    ],
)
def test_schema_refuses_incomplete_updates(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        MemoryUpdate.model_validate(fields)


def test_batch_validates_from_llm_json() -> None:
    raw = '{"updates": [{"op": "add", "scope": "skill:excel", "text": "冻结首行"}, {"op": "none", "scope": "user"}]}'
    batch = MemoryUpdateBatch.model_validate_json(raw)
    assert [u.op for u in batch.updates] == [UpdateOp.ADD, UpdateOp.NONE]


def test_update_replaces_in_place_and_input_is_untouched() -> None:
    docs = _docs()
    batch = MemoryUpdateBatch(
        updates=[
            MemoryUpdate(
                op=UpdateOp.UPDATE,
                scope="user",
                entry_id="u1",
                text="日期用 YYYY-MM-DD",
                slot="date_format=iso",
            )
        ]
    )
    result = apply_updates(docs, batch, now=NOW)  # type: ignore[arg-type]
    (entry,) = result.documents["user"].entries
    assert (entry.id, entry.text, entry.slot) == ("u1", "日期用 YYYY-MM-DD", "date_format=iso")
    assert result.documents["user"].updated_at == NOW
    assert result.applied[0].old_text == "日期用 YYYY/MM/DD"
    assert docs["user"].entries[0].text == "日期用 YYYY/MM/DD"  # type: ignore[attr-defined]


def test_duplicate_add_is_none_not_delete_and_unknown_ids_are_rejected() -> None:
    batch = MemoryUpdateBatch(
        updates=[
            MemoryUpdate(op=UpdateOp.ADD, scope="user", text="日期用  yyyy/mm/dd。"),
            MemoryUpdate(op=UpdateOp.UPDATE, scope="user", entry_id="u9", text="x"),
            MemoryUpdate(op=UpdateOp.DELETE, scope="user", entry_id="u9"),
            MemoryUpdate(op=UpdateOp.UPDATE, scope="user", entry_id="u1", text="日期用 YYYY/MM/DD"),
        ]
    )
    result = apply_updates(_docs(), batch, now=NOW)  # type: ignore[arg-type]
    assert [c.op for c in result.applied] == [UpdateOp.NONE, UpdateOp.NONE]
    assert [c.note for c in result.applied] == ["duplicate", "unchanged"]
    assert [c.note for c in result.rejected] == ["unknown entry", "unknown entry"]
    assert len(result.documents["user"].entries) == 1
    assert result.documents["user"].updated_at is None


def test_secret_is_refused_at_write_time_and_new_scope_gets_a_document() -> None:
    batch = MemoryUpdateBatch(
        updates=[
            MemoryUpdate(op=UpdateOp.ADD, scope="user", text="密码是 hunter2xyz"),
            MemoryUpdate(op=UpdateOp.ADD, scope="skill:chart", text="不要饼图"),
        ]
    )
    result = apply_updates({}, batch, now=NOW)
    assert [c.note for c in result.rejected] == ["contains pii"]
    assert list(result.documents) == ["skill:chart"]
    assert result.documents["skill:chart"].entries[0].id == "s1"
    assert result.documents["skill:chart"].char_budget == 2000


def test_delete_removes_entry() -> None:
    batch = MemoryUpdateBatch(
        updates=[MemoryUpdate(op=UpdateOp.DELETE, scope="user", entry_id="u1")]
    )
    assert apply_updates(_docs(), batch, now=NOW).documents["user"].entries == []  # type: ignore[arg-type]
