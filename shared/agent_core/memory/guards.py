"""The checks a model's update batch passes before anything is written (the rules' own checks).

An LLM consolidator is told the rules; this module makes sure they held. Each update of a
:class:`MemoryUpdateBatch` proposed by a model is checked, in order, against the documents as the
batch leaves them:

- **privacy** — text that holds a secret or identifier, or that is left talking about one, is
  refused (``scrub_statement`` must keep it whole);
- **support** — text must come from what the user said: most of its content words appear in the
  user's turns or the detected candidates of the batch, or in the memory it rewrites (no invented
  claims);
- **supersession** — an ``add`` that states a preference already held (same slot, the same rule
  in other words, or a new value said as a change about the same thing) becomes an ``update`` of
  that entry, or ``none`` when nothing changes; an
  ``update`` that only restates its entry is ``none``. The old value never stays beside the new:
  clauses of the new text that only name the value it replaces ("two decimals was too fine") go.

Refused updates are returned with a note, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agent_core.errors import REDACTED

from ._text import containment, split_clauses
from .document import MemoryDocument, MemoryEntry, new_document
from .fallback import NEAR_DUPLICATE, core_text, revised_entry, strip_markers, without_old_value
from .privacy import about_a_secret, find_pii, scrub_statement, scrub_text
from .slots import detect_slots
from .updates import AppliedChange, MemoryUpdate, MemoryUpdateBatch, UpdateOp

__all__ = ["SUPPORT", "vet_batch"]

# Share of an entry's content words that must appear in the user's words of the batch.
SUPPORT = 0.6


def _slot_keys(text: str, slot: str | None) -> set[str]:
    keys = {slot.split("=", 1)[0]} if slot else set()
    keys.update(m.key for c in split_clauses(text) for m in detect_slots(c))
    return keys


def _slot_values(text: str, slot: str | None) -> set[str]:
    values = {slot} if slot else set()
    values.update(f"{m.key}={m.value}" for c in split_clauses(text) for m in detect_slots(c))
    return values


def _held(doc: MemoryDocument, u: MemoryUpdate) -> tuple[str | None, bool]:
    """(id of the entry ``u`` restates or replaces, whether the entry already says it)."""
    assert u.text is not None
    keys, values = _slot_keys(u.text, u.slot), _slot_values(u.text, u.slot)
    for entry in doc.entries:
        if entry.id == u.entry_id and u.op is UpdateOp.UPDATE:
            continue
        if core_text(entry.text) == core_text(u.text):
            return entry.id, True
        entry_keys = _slot_keys(entry.text, entry.slot)
        if keys & entry_keys:
            same = bool(values) and values <= _slot_values(entry.text, entry.slot)
            return entry.id, same
        if not keys and containment(u.text, entry.text) >= NEAR_DUPLICATE:
            return entry.id, True
    if not keys:
        # Said as a change about the same thing as an entry ("… is the window now", "改成…"):
        # that entry is replaced, not joined by a second one (supersession by attribute).
        others = [e for e in doc.entries if not (e.id == u.entry_id and u.op is UpdateOp.UPDATE)]
        rest = doc.model_copy(update={"entries": others})
        found = revised_entry({doc.scope: rest}, [doc.scope], u.text, u.text)
        if found is not None:
            return found[1].id, False
    return None, False


def _restates(u: MemoryUpdate, old_text: str, old_slot: str | None) -> bool:
    """The update says nothing the entry does not: same slot values, or the same words."""
    assert u.text is not None
    new, old = _slot_values(u.text, u.slot), _slot_values(old_text, old_slot)
    if not new <= old:
        return False
    return bool(new) or containment(strip_markers(u.text), old_text) >= NEAR_DUPLICATE


def _dropping_replaced(u: MemoryUpdate, old: MemoryEntry) -> str:
    """``u``'s text without the clauses that only name a value of ``old`` it replaces."""
    assert u.text is not None
    text, held = u.text, _slot_values(old.text, old.slot)
    changed = {v.split("=", 1)[0] for v in _slot_values(u.text, u.slot) - held}
    for value in sorted(held):
        if value.split("=", 1)[0] in changed:  # the slot takes a new value: the old is history
            text = without_old_value(text, value)
    return text


def _refuse(u: MemoryUpdate, note: str) -> AppliedChange:
    return AppliedChange(op=u.op, scope=u.scope, entry_id=u.entry_id, note=note)


def vet_batch(
    batch: MemoryUpdateBatch,
    documents: Mapping[str, MemoryDocument],
    evidence: Sequence[str],
) -> tuple[MemoryUpdateBatch, list[AppliedChange]]:
    """``batch`` with every update made to obey the rules, and the updates refused.

    ``evidence`` is what the user said in the batch (their turns, scrubbed, and the detected
    candidates); ``documents`` are the files the batch was proposed against.
    """
    said = scrub_text("\n".join(evidence))
    secret_said = REDACTED in said
    said += "\n" + "\n".join(e.text for d in documents.values() for e in d.entries)
    kept: list[MemoryUpdate] = []
    refused: list[AppliedChange] = []
    working = {scope: doc.model_copy(deep=True) for scope, doc in documents.items()}
    for u in batch.updates:
        if u.op in (UpdateOp.NONE, UpdateOp.DELETE) or u.text is None:
            kept.append(u)
            continue
        about_secret = secret_said and about_a_secret(u.text)
        if find_pii(u.text) or about_secret or scrub_statement(u.text).text != u.text:
            refused.append(_refuse(u, "contains pii"))
            continue
        if containment(u.text, said) < SUPPORT:
            refused.append(_refuse(u, "unsupported"))
            continue
        doc = working.setdefault(u.scope, new_document(u.scope))
        target, same = _held(doc, u)
        if u.op is UpdateOp.UPDATE:
            old = doc.find(u.entry_id or "")
            if old is not None and _restates(u, old.text, old.slot):
                kept.append(u.model_copy(update={"op": UpdateOp.NONE, "reason": "restatement"}))
                continue
        if target is not None and same:
            kept.append(
                u.model_copy(update={"op": UpdateOp.NONE, "entry_id": target, "reason": "held"})
            )
            continue
        if target is not None and u.op is UpdateOp.ADD:
            u = u.model_copy(update={"op": UpdateOp.UPDATE, "entry_id": target})
        replaced = doc.find(u.entry_id or "") if u.op is UpdateOp.UPDATE else None
        if replaced is not None:
            u = u.model_copy(update={"text": _dropping_replaced(u, replaced)})
        kept.append(u)
        text = u.text
        assert text is not None
        entry = doc.find(u.entry_id or "") if u.op is UpdateOp.UPDATE else None
        if entry is not None:
            entry.text, entry.slot = text, u.slot or entry.slot
        elif u.op is UpdateOp.ADD:  # later updates of the batch see it
            doc.entries.append(
                MemoryEntry(id=u.entry_id or doc.next_entry_id(), text=text, slot=u.slot)
            )
    return MemoryUpdateBatch(updates=kept), refused
