"""Structured memory updates (add / update / delete / none) and how a batch is applied.

The same schema validates the LLM consolidator's output and the rule fallback's, so both paths go
through :func:`apply_updates` and its guards (the failure modes the anchors' users filed):

- an identical or equivalent ``add`` becomes ``none``, never a second bullet nor a delete;
- an ``update`` replaces the text in place (no old value left beside the new) and is refused
  when it names an unknown entry or leaves the text unchanged;
- nothing holding a secret or identifier is written (checked again at write time).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._text import normalize
from .document import MemoryDocument, MemoryEntry, new_document
from .privacy import find_pii
from .scope import SCOPE_PATTERN

__all__ = [
    "AppliedChange",
    "ApplyResult",
    "MemoryUpdate",
    "MemoryUpdateBatch",
    "UpdateOp",
    "apply_updates",
]


class UpdateOp(StrEnum):
    """What to do with one entry (the classic Mem0 operations)."""

    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"
    NONE = "none"


class MemoryUpdate(BaseModel):
    """One proposed change to one entry of one scope.

    ``add`` needs ``text`` (``entry_id`` optional: a proposed id); ``update`` needs ``entry_id``
    and ``text``; ``delete`` needs ``entry_id``. ``slot`` is ``key=value`` when known.
    """

    model_config = ConfigDict(extra="forbid")

    op: UpdateOp
    scope: str = Field(pattern=SCOPE_PATTERN)
    entry_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_\-]+$")
    text: str | None = Field(default=None, max_length=500)
    slot: str | None = Field(default=None, pattern=r"^[a-z0-9_]+(:[a-z0-9_]+)?=\S+$")
    reason: str | None = None

    @model_validator(mode="after")
    def _fields_for_op(self) -> MemoryUpdate:
        needs_text = self.op in (UpdateOp.ADD, UpdateOp.UPDATE)
        needs_id = self.op in (UpdateOp.UPDATE, UpdateOp.DELETE)
        if needs_text and not (self.text and self.text.strip()):
            raise ValueError(f"{self.op} needs text")
        if needs_id and not self.entry_id:
            raise ValueError(f"{self.op} needs entry_id")
        return self


class MemoryUpdateBatch(BaseModel):
    """The updates of one consolidation, applied in order."""

    model_config = ConfigDict(extra="forbid")

    updates: list[MemoryUpdate] = Field(default_factory=list)


class AppliedChange(BaseModel):
    """What one update did (or why it did nothing): the change-log record, minus run ids."""

    model_config = ConfigDict(extra="forbid")

    op: UpdateOp
    scope: str
    entry_id: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    note: str | None = None  # e.g. "duplicate", "unknown entry", "contains pii"


class ApplyResult(BaseModel):
    """The documents after a batch, the changes made, and the updates refused."""

    model_config = ConfigDict(extra="forbid")

    documents: dict[str, MemoryDocument]
    applied: list[AppliedChange] = Field(default_factory=list)
    rejected: list[AppliedChange] = Field(default_factory=list)


def _duplicate(doc: MemoryDocument, text: str, skip: str | None = None) -> MemoryEntry | None:
    key = normalize(text)
    return next((e for e in doc.entries if e.id != skip and normalize(e.text) == key), None)


def _apply_one(doc: MemoryDocument, u: MemoryUpdate) -> AppliedChange:
    """Apply ``u`` to ``doc`` in place; the change's ``note`` is set when nothing was written."""
    change = AppliedChange(op=u.op, scope=u.scope, entry_id=u.entry_id)
    if u.op is UpdateOp.NONE:
        return change
    if u.text is not None and find_pii(u.text):
        change.note = "contains pii"
        return change
    if u.op is UpdateOp.ADD:
        assert u.text is not None
        if dup := _duplicate(doc, u.text):
            change.op, change.entry_id, change.note = UpdateOp.NONE, dup.id, "duplicate"
            return change
        entry_id = (
            u.entry_id if u.entry_id and doc.find(u.entry_id) is None else doc.next_entry_id()
        )
        doc.add_entry(MemoryEntry(id=entry_id, text=u.text, slot=u.slot))
        change.entry_id, change.new_text = entry_id, doc.entries[-1].text
        return change
    entry = doc.find(u.entry_id or "")
    if entry is None:
        change.note = "unknown entry"
        return change
    change.old_text = entry.text
    if u.op is UpdateOp.DELETE:
        doc.remove_entry(entry)
        return change
    assert u.text is not None
    if normalize(u.text) == normalize(entry.text):
        change.op, change.note = UpdateOp.NONE, "unchanged"
        return change
    if dup := _duplicate(doc, u.text, skip=entry.id):
        doc.remove_entry(entry)  # the new text already exists elsewhere: keep one bullet
        change.op, change.entry_id, change.new_text = UpdateOp.DELETE, entry.id, dup.text
        return change
    entry.text, entry.slot = MemoryEntry(id=entry.id, text=u.text).text, u.slot or entry.slot
    change.new_text = entry.text
    return change


def apply_updates(
    documents: Mapping[str, MemoryDocument], batch: MemoryUpdateBatch, *, now: datetime
) -> ApplyResult:
    """Apply ``batch`` in order to copies of ``documents`` (keyed by scope); inputs are not mutated.

    A scope without a document gets a new one. ``updated_at`` is set to ``now`` on every document
    that changed. Refused updates are returned in ``rejected`` with a note, never raised. A
    document no update names is returned as it came (the same object, not a copy): the caller
    may keep it, never change it in place.
    """
    docs = dict(documents)
    copied: set[str] = set()  # copied on the first update that names their scope
    applied: list[AppliedChange] = []
    rejected: list[AppliedChange] = []
    for update in batch.updates:
        doc = docs.get(update.scope)
        if doc is not None and update.scope not in copied:
            doc = docs[update.scope] = doc.model_copy(deep=True)
            copied.add(update.scope)
        doc = doc or new_document(update.scope)
        change = _apply_one(doc, update)
        refused = change.note in ("contains pii", "unknown entry")
        (rejected if refused else applied).append(change)
        if change.op is not UpdateOp.NONE and not refused:
            doc.updated_at = now
            docs[update.scope] = doc
    return ApplyResult(documents=docs, applied=applied, rejected=rejected)
