"""One consolidation of one account's batch: detect → propose (LLM or rules) → commit.

The batch is proposed against the files as read *before* the LLM call; if a user (the API or an
editor) changed a file meanwhile, it is merged again against the fresh files (the rule path is
recomputed, the LLM batch is re-based so that a user edit wins). Each file is then written only
over the version the merge read (a conditional write in the file store): when another writer —
a user, or the extractor of another host — got there first, the commit reads again and merges
again, so an edit is never lost. Files over budget are compacted, and whatever compaction
removes is logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_core.files import VersionConflict
from agent_core.memory import (
    AppliedChange,
    Interaction,
    MemoryDocument,
    MemoryUpdateBatch,
    Signal,
    UpdateOp,
    apply_updates,
    compact,
    consolidate_fallback,
    detect_signals,
    render_document,
)
from agent_core.memory.guards import vet_batch

from .llm import LLMProposer, ProposalError
from .prompt import user_words
from .rebase import rebase
from .store import ChangeRecord, MemoryStore, Snapshot, Source

__all__ = ["BatchItem", "ConsolidationReport", "Consolidator"]

log = logging.getLogger(__name__)

Mode = Literal["llm", "fallback", "skipped"]
Step = tuple[MemoryUpdateBatch, list[Source]]
_COMMIT_ATTEMPTS = 5


class BatchItem(BaseModel):
    """One interaction of a batch with where it came from."""

    model_config = ConfigDict(extra="forbid")

    interaction: Interaction
    source: Source = Field(default_factory=Source)


class ConsolidationReport(BaseModel):
    """What one consolidation did."""

    model_config = ConfigDict(extra="forbid")

    account_id: str
    mode: Mode
    items: int
    signals: int = 0
    llm_error: str | None = None
    merged_again: bool = False
    changes: list[ChangeRecord] = Field(default_factory=list)
    rejected: int = 0
    written: list[str] = Field(default_factory=list)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _record(change: AppliedChange, mode: str, sources: list[Source], now: datetime) -> ChangeRecord:
    return ChangeRecord(
        ts=now,
        scope=change.scope,
        op=str(change.op),
        mode=mode,
        entry_id=change.entry_id,
        old_text=change.old_text,
        new_text=change.new_text,
        note=change.note,
        sources=sources,
    )


class Consolidator:
    """Runs consolidations against one :class:`MemoryStore`; stateless between calls."""

    def __init__(
        self,
        store: MemoryStore,
        proposer: LLMProposer | None = None,
        *,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.store = store
        self.proposer = proposer
        self.clock = clock

    async def consolidate(self, account_id: str, items: Sequence[BatchItem]) -> ConsolidationReport:
        """Consolidate ``items`` (in order) into the account's files and return what happened."""
        # Detection is CPU work that grows with the messages (bounded, see ``signals.bounded``):
        # it runs in a thread so that queries (renders at run start, API reads) keep answering.
        found = await asyncio.to_thread(_detect, items)
        batch = [(item, signals) for item, signals in found if signals]
        report = ConsolidationReport(
            account_id=account_id,
            mode="skipped",
            items=len(items),
            signals=sum(len(s) for _, s in batch),
        )
        if not batch:
            return report  # nothing worth an LLM call, nothing to write
        # A proposal is made from the files read before the model is asked (they may change
        # meanwhile); the rules read them only under the lock, their work being quick.
        snap: Snapshot | None = None
        llm_batch: MemoryUpdateBatch | None = None
        refused: list[AppliedChange] = []
        if self.proposer is not None:
            snap = await self.store.load(account_id)
            try:
                docs = _usable(snap)
                llm_batch = await self.proposer.propose(
                    docs, [(i.interaction, s) for i, s in batch]
                )
                # The model's answer obeys the rules' privacy and supersession checks too.
                evidence = [w for i, s in batch for w in (*user_words(i.interaction), *_texts(s))]
                llm_batch, refused = vet_batch(llm_batch, docs, evidence)
            except ProposalError as exc:
                report.llm_error = exc.code
                log.info("memory LLM unusable for %s (%s); rules apply", account_id, exc.code)
        report.mode = "llm" if llm_batch is not None else "fallback"
        async with self.store.lock(account_id):
            for _ in range(_COMMIT_ATTEMPTS):
                fresh = await self.store.load(account_id)
                snap = fresh if snap is None else snap
                if _etags(fresh) != _etags(snap):
                    report.merged_again = True
                steps, dropped = self._steps(snap, fresh, batch, llm_batch)
                if await self._commit(account_id, fresh, steps, [*refused, *dropped], report):
                    return report
                # Merged again against ``snap`` still: an edit made since it was read wins.
                report.merged_again = True
        log.warning("memory of %s kept changing during commit; batch not applied", account_id)
        return report

    def _steps(
        self,
        snap: Snapshot,
        fresh: Snapshot,
        batch: Sequence[tuple[BatchItem, Sequence[Signal]]],
        llm_batch: MemoryUpdateBatch | None,
    ) -> tuple[list[Step], list[AppliedChange]]:
        docs = _usable(fresh)
        if llm_batch is None:
            # Rules are cheap and deterministic: recompute against what is on disk now.
            working, steps = dict(docs), []
            for item, signals in batch:
                step = consolidate_fallback(signals, working, now=self.clock())
                working = apply_updates(working, step, now=self.clock()).documents
                steps.append((step, [item.source]))
            return steps, []
        # Re-based even when nothing changed: a proposed id that an entry already has is
        # renamed, and the batch's later references to it follow.
        rebased, dropped = rebase(llm_batch, _usable(snap), docs)
        sources = [item.source for item, _ in batch]
        return [(rebased, sources)], dropped

    async def _commit(
        self,
        account_id: str,
        fresh: Snapshot,
        steps: list[Step],
        dropped: list[AppliedChange],
        report: ConsolidationReport,
    ) -> bool:
        """Apply ``steps`` to ``fresh`` and write each changed file over the version ``fresh``
        read; ``False`` when one changed under us (the files written before it stay, with their
        log records)."""
        now = self.clock()
        mode = report.mode
        docs: dict[str, MemoryDocument] = _usable(fresh)
        records = [_record(d, mode, steps[0][1] if steps else [], now) for d in dropped]
        changed: set[str] = set()
        rejected = 0
        for step, sources in steps:
            allowed = [u for u in step.updates if u.scope not in fresh.broken]
            result = apply_updates(docs, MemoryUpdateBatch(updates=allowed), now=now)
            docs, rejected = result.documents, rejected + len(result.rejected)
            for change in result.applied:
                if change.op is not UpdateOp.NONE:
                    changed.add(change.scope)
                    records.append(_record(change, mode, sources, now))
        for scope in sorted(changed):
            records.extend(self._compact(docs, scope, now))
        tags: dict[str, str] = {}
        for s in sorted(changed):
            text = render_document(docs[s])
            try:
                tags[s], _ = await self.store.write(
                    account_id, s, text, version=fresh.versions.get(s)
                )
            except VersionConflict:
                # Another writer changed this file since ``fresh`` was read: keep the log of
                # what went in, then merge again from the files as they are now.
                await self.store.append_log(account_id, _versioned(records, tags, only=True))
                return False
        records = _versioned(records, tags, only=False)
        await self.store.append_log(account_id, records)
        report.changes, report.rejected, report.written = records, rejected, sorted(changed)
        return True

    def _compact(
        self, docs: dict[str, MemoryDocument], scope: str, now: datetime
    ) -> list[ChangeRecord]:
        rep = compact(docs[scope])
        if not rep.changed:
            return []
        docs[scope] = rep.document

        def rec(op: str, entry_id: str, note: str, old_text: str | None = None) -> ChangeRecord:
            return ChangeRecord(
                ts=now, scope=scope, mode="compaction", op=op, entry_id=entry_id,
                note=note, old_text=old_text,
            )  # fmt: skip

        records = [rec("delete", gone, f"merged into {kept}") for gone, kept in rep.merged]
        records += [rec("update", e, "shortened") for e in rep.shortened]
        # Never a silent drop: an evicted entry is logged with its text (already scrubbed).
        records += [rec("delete", e.id, "evicted: over budget", e.text) for e in rep.evicted]
        return records


def _versioned(
    records: list[ChangeRecord], tags: dict[str, str], *, only: bool
) -> list[ChangeRecord]:
    """``records`` stamped with the version their file was written as (``only``: just those of
    files that were written)."""
    return [
        r.model_copy(update={"version": tags.get(r.scope)})
        for r in records
        if not only or r.scope in tags
    ]


def _detect(items: Sequence[BatchItem]) -> list[tuple[BatchItem, list[Signal]]]:
    return [(item, detect_signals(item.interaction)) for item in items]


def _texts(signals: Sequence[Signal]) -> list[str]:
    return [s.text for s in signals]


def _usable(snap: Snapshot) -> dict[str, MemoryDocument]:
    return {s: d for s, d in snap.documents.items() if s not in snap.broken}


def _etags(snap: Snapshot) -> dict[str, str | None]:
    return {s: t for s, t in snap.etags.items() if t is not None}
