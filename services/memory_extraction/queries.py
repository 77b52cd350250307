"""Answers to memory queries: the injection text for a run, and file read/write for the API.

A write is refused when ``if_match`` is stale (``precondition_failed``), when the content is not
a memory file (``memory_invalid``) or when it holds a secret or identifier
(``memory_contains_secret``): what the API writes obeys the same privacy rule as consolidation.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agent_core.bus import Delivery
from agent_core.bus.contracts.memory import (
    MemoryQuery,
    MemoryReply,
    ReadMemory,
    RenderMemory,
    WriteMemory,
)
from agent_core.errors import AgentCoreError, SchemaError, StorageError
from agent_core.memory import (
    MemoryDocument,
    find_pii,
    parse_document,
    render_injection,
    skill_scope,
)
from agent_core.memory.client import PRECONDITION_FAILED, MemoryFile, RenderedMemory

from .store import ChangeRecord, MemoryStore, etag_of

__all__ = ["MemoryQueries"]


def _diff(
    scope: str, old: MemoryDocument | None, new: MemoryDocument, now: datetime
) -> list[ChangeRecord]:
    """Change-log records of a user's write, entry by entry (ids are stable across edits)."""
    before = {e.id: e.text for e in old.entries} if old else {}
    after = {e.id: e.text for e in new.entries}
    records = []
    for entry_id in sorted(before.keys() | after.keys()):
        old_text, new_text = before.get(entry_id), after.get(entry_id)
        if old_text == new_text:
            continue
        op = "add" if old_text is None else "delete" if new_text is None else "update"
        records.append(
            ChangeRecord(
                ts=now,
                scope=scope,
                op=op,
                mode="api",
                entry_id=entry_id,
                old_text=old_text,
                new_text=new_text,
            )  # fmt: skip
        )
    return records


class MemoryQueries:
    """The handler of the memory query stream."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def handle(self, query: MemoryQuery, _: Delivery) -> MemoryReply:
        """Answer one query; failures become an error reply, never an exception."""
        try:
            match query:
                case RenderMemory():
                    data: object = self.render(query)
                case ReadMemory():
                    data = self.read(query)
                case WriteMemory():
                    async with self.store.lock(query.account_id):
                        data = self.write(query)
            return MemoryReply(ok=True, data=data)
        except AgentCoreError as exc:
            return MemoryReply(ok=False, error=exc.to_payload())

    def render(self, query: RenderMemory) -> RenderedMemory:
        """``user.md`` plus the memory of the skills enabled for the run."""
        scopes = ["user", *(skill_scope(s) for s in query.skills)]
        snap = self.store.load(query.account_id, scopes)
        skills = [snap.documents[s] for s in scopes[1:] if s in snap.documents]
        return RenderedMemory(text=render_injection(snap.documents.get("user"), skills))

    def read(self, query: ReadMemory) -> MemoryFile:
        """The file's raw text and ETag (empty text and no ETag when it does not exist)."""
        data = self.store.read_raw(query.account_id, query.scope)
        content = data.decode("utf-8", errors="replace") if data is not None else ""
        return MemoryFile(scope=query.scope, content=content, etag=etag_of(data))

    def write(self, query: WriteMemory) -> MemoryFile:
        """Replace the file if ``if_match`` still holds; log what changed."""
        current = self.store.read_raw(query.account_id, query.scope)
        if query.if_match is not None and query.if_match != etag_of(current):
            raise StorageError(
                PRECONDITION_FAILED,
                "the memory file changed since it was read",
                details={"scope": query.scope, "etag": etag_of(current)},
            )
        if kinds := find_pii(query.content):
            raise SchemaError(
                "memory_contains_secret",
                "memory files may not hold secrets or personal identifiers",
                details={"kinds": sorted(set(kinds))},
            )
        try:
            new = parse_document(query.content, scope=query.scope)
        except (SchemaError, ValueError) as exc:
            raise SchemaError("memory_invalid", f"not a memory file: {exc}") from exc
        if new.scope != query.scope:
            raise SchemaError("memory_invalid", "the frontmatter names another scope")
        old = None
        if current is not None:
            try:
                old = parse_document(current.decode("utf-8"), scope=query.scope)
            except (SchemaError, ValueError, UnicodeDecodeError):
                old = None  # replacing a broken file: every entry counts as added
        tag = self.store.write(query.account_id, query.scope, query.content)
        self.store.append_log(query.account_id, _diff(query.scope, old, new, datetime.now(UTC)))
        return MemoryFile(scope=query.scope, content=query.content, etag=tag)
