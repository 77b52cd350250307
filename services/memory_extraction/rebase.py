"""Re-basing an LLM batch onto files a user changed while the model was thinking.

The batch was proposed against ``before``; the files now hold ``fresh``. User edits win:

- an ``update``/``delete`` of an entry the user changed or removed is dropped (their text stays);
- an ``add`` whose proposed id the user's file now uses gets a fresh id, and later updates of the
  batch that named the proposed id follow it;
- everything else applies to ``fresh`` through :func:`apply_updates`, whose guards turn an add
  the user already wrote into ``none``.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_core.memory import (
    AppliedChange,
    MemoryDocument,
    MemoryEntry,
    MemoryUpdate,
    MemoryUpdateBatch,
    UpdateOp,
    new_document,
)

__all__ = ["rebase"]


def _user_touched(
    u: MemoryUpdate, before: Mapping[str, MemoryDocument], fresh: Mapping[str, MemoryDocument]
) -> bool:
    old_doc, new_doc = before.get(u.scope), fresh.get(u.scope)
    old = old_doc.find(u.entry_id or "") if old_doc else None
    if old is None:
        return False  # not in the snapshot: an entry this batch adds, handled by the id map
    new = new_doc.find(old.id) if new_doc else None
    return new is None or new.text != old.text


def rebase(
    batch: MemoryUpdateBatch,
    before: Mapping[str, MemoryDocument],
    fresh: Mapping[str, MemoryDocument],
) -> tuple[MemoryUpdateBatch, list[AppliedChange]]:
    """``batch`` adjusted to ``fresh``, and the updates dropped because a user edit wins."""
    working = {scope: doc.model_copy(deep=True) for scope, doc in fresh.items()}
    renamed: dict[tuple[str, str], str] = {}
    kept: list[MemoryUpdate] = []
    dropped: list[AppliedChange] = []
    for u in batch.updates:
        doc = working.setdefault(u.scope, new_document(u.scope))
        if u.op is UpdateOp.ADD:
            wanted = u.entry_id
            taken = wanted is None or doc.find(wanted) is not None
            new_id = doc.next_entry_id() if taken else wanted
            assert new_id is not None
            if wanted is not None and new_id != wanted:
                renamed[(u.scope, wanted)] = new_id
            kept.append(u.model_copy(update={"entry_id": new_id}))
            # Reserve the id so that two adds of this batch never receive the same one.
            doc.entries.append(MemoryEntry(id=new_id, text="reserved"))
            continue
        key = (u.scope, u.entry_id or "")
        if key in renamed:
            kept.append(u.model_copy(update={"entry_id": renamed[key]}))
        elif u.op is not UpdateOp.NONE and _user_touched(u, before, fresh):
            dropped.append(
                AppliedChange(op=u.op, scope=u.scope, entry_id=u.entry_id, note="user edit wins")
            )
        else:
            kept.append(u)
    return MemoryUpdateBatch(updates=kept), dropped
