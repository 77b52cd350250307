"""Bring a document back under its character budget without ever dropping silently.

Steps, each stopping as soon as the document fits: merge near-duplicates (the contained entry
goes, the richer stays); shorten entries by removing their explanatory clauses (reasons);
finally evict whole entries — tool lessons first, then the oldest statements, slot preferences
last — and *return* them, so the caller logs them and can tell the user what no longer fits.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from . import _lexicon as lx
from ._text import containment, split_clauses
from .document import MemoryDocument, MemoryEntry

__all__ = ["CompactionReport", "compact"]

_NEAR = 0.8


class CompactionReport(BaseModel):
    """The compacted document and everything compaction did to it."""

    model_config = ConfigDict(extra="forbid")

    document: MemoryDocument
    merged: list[tuple[str, str]] = Field(default_factory=list)  # (removed id, kept id)
    shortened: list[str] = Field(default_factory=list)
    evicted: list[MemoryEntry] = Field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when compaction altered the document."""
        return bool(self.merged or self.shortened or self.evicted)


def _merge(doc: MemoryDocument, report: CompactionReport) -> None:
    for entry in list(doc.entries):
        for other in doc.entries:
            same_slot = entry.slot is None or other.slot is None or entry.slot == other.slot
            longer = other is not entry and same_slot and len(other.text) >= len(entry.text)
            if longer and containment(entry.text, other.text) >= _NEAR:
                doc.remove_entry(entry)
                report.merged.append((entry.id, other.id))
                break


def _shorten(doc: MemoryDocument, report: CompactionReport) -> None:
    for entry in doc.entries:
        if doc.chars_used() <= doc.char_budget:
            return
        clauses = split_clauses(entry.text)
        kept = [c for c in clauses if not lx.REASON.search(c)]
        if kept and len(kept) < len(clauses):
            joiner = "，" if any("\u4e00" <= ch <= "\u9fff" for ch in entry.text) else ", "
            entry.text = joiner.join(kept)
            report.shortened.append(entry.id)


def _eviction_order(entry: MemoryEntry) -> int:
    # Lessons are cheapest to relearn; slot preferences are the most often used: evict them last.
    if "时的做法" in entry.text or ": when it fails with" in entry.text:
        return 0
    return 2 if entry.slot else 1


def compact(document: MemoryDocument) -> CompactionReport:
    """A copy of ``document`` that fits its ``char_budget``, with a report of every change."""
    doc = document.model_copy(deep=True)
    report = CompactionReport(document=doc)
    if doc.chars_used() <= doc.char_budget:
        return report
    _merge(doc, report)
    _shorten(doc, report)
    order = sorted(doc.entries, key=lambda e: (_eviction_order(e), doc.entries.index(e)))
    for entry in order:
        if doc.chars_used() <= doc.char_budget:
            break
        doc.remove_entry(entry)
        report.evicted.append(entry)
    report.document = doc
    return report
