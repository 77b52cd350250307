"""Answers to memory queries: the injection text for a run; list, read, write, history and
restore of the files for the API.

A write is refused when ``if_match`` is stale (``precondition_failed``), when the content is not
a memory file (``memory_invalid``, also over :data:`MAX_FILE_CHARS`) or when it holds a secret or
identifier (``memory_contains_secret``): what the API writes obeys the same privacy rule as
consolidation. The user's lines are stored exactly as sent; only the frontmatter (ids, slots,
``updated_at``) is the service's. A restore is a write of a kept version, with the same checks.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from agent_core.bus import Delivery
from agent_core.bus.contracts.memory import (
    ListMemory,
    MemoryHistory,
    MemoryQuery,
    MemoryReply,
    ReadMemory,
    RenderMemory,
    RestoreMemory,
    WriteMemory,
)
from agent_core.errors import AgentCoreError, SchemaError, StorageError
from agent_core.files import VersionConflict
from agent_core.memory import (
    MemoryDocument,
    find_pii,
    parse_document,
    render_document,
    render_injection,
    skill_scope,
)
from agent_core.memory.client import (
    PRECONDITION_FAILED,
    MemoryChange,
    MemoryFile,
    MemoryFileInfo,
    MemoryFiles,
    MemoryHistoryView,
    MemoryVersion,
    RenderedMemory,
)
from agent_core.memory.document import MAX_FILE_CHARS
from agent_core.memory.scope import scope_skill

from .store import ChangeRecord, MemoryStore, etag_of

__all__ = ["MemoryQueries"]

# Reads and conditional writes of one user edit before it gives up (each lost race is an
# extractor's commit on another host: a few at most).
_WRITE_ATTEMPTS = 5


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


# Rendered blocks kept (by their files' ETags, see MemoryQueries.render); the oldest goes first.
_RENDERED_KEPT = 1024


class MemoryQueries:
    """The handler of the memory query stream."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._rendered: dict[tuple[str, tuple[str, ...], tuple[str | None, ...]], str] = {}

    async def handle(self, query: MemoryQuery, _: Delivery) -> MemoryReply:
        """Answer one query; failures become an error reply, never an exception."""
        try:
            match query:
                case RenderMemory():
                    data: object = await self.render(query)
                case ReadMemory():
                    data = await self.read(query)
                case WriteMemory():
                    async with self.store.lock(query.account_id):
                        data = await self.write(query)
                case ListMemory():
                    data = await self.list(query)
                case MemoryHistory():
                    data = await self.history(query)
                case RestoreMemory():
                    async with self.store.lock(query.account_id):
                        data = await self.restore(query)
            return MemoryReply(ok=True, data=data)
        except AgentCoreError as exc:
            return MemoryReply(ok=False, error=exc.to_payload())

    async def render(self, query: RenderMemory) -> RenderedMemory:
        """``user.md`` plus the memory of the skills enabled for the run."""
        scopes = ["user", *(skill_scope(s) for s in query.skills)]
        snap = await self.store.load(query.account_id, scopes)
        # The block is a function of the files' contents, which their ETags name (a broken
        # file's too: it renders as absent either way); every run of an account starts with
        # the same few files, and rendering them again was ~40 % of a render's time.
        key = (query.account_id, tuple(scopes), tuple(snap.etags[s] for s in scopes))
        text = self._rendered.get(key)
        if text is None:
            skills = [snap.documents[s] for s in scopes[1:] if s in snap.documents]
            text = render_injection(snap.documents.get("user"), skills)
            if len(self._rendered) >= _RENDERED_KEPT:
                del self._rendered[next(iter(self._rendered))]
            self._rendered[key] = text
        return RenderedMemory(text=text)

    async def read(self, query: ReadMemory) -> MemoryFile:
        """The file's raw text and ETag (empty text and no ETag when it does not exist)."""
        data = await self.store.read_raw(query.account_id, query.scope)
        content = data.decode("utf-8", errors="replace") if data is not None else ""
        return MemoryFile(scope=query.scope, content=content, etag=etag_of(data))

    async def write(self, query: WriteMemory) -> MemoryFile:
        """Replace the file if ``if_match`` still holds; log what changed."""
        return await self._replace(
            query.account_id, query.scope, query.content, query.if_match, "api"
        )

    async def restore(self, query: RestoreMemory) -> MemoryFile:
        """Write a kept version of the file back (as a write: same checks, logged as a restore)."""
        data = await self.store.version(query.account_id, query.scope, query.version)
        if data is None:
            raise StorageError(
                "memory_version_not_found",
                "no such version of this memory file is kept",
                details={"scope": query.scope},
            )
        content = data.decode("utf-8", errors="replace")
        return await self._replace(
            query.account_id, query.scope, content, query.if_match, "restore"
        )

    async def _replace(
        self, account_id: str, scope: str, content: str, if_match: str | None, mode: str
    ) -> MemoryFile:
        # The user's If-Match names the content they read; the store's version guards the gap
        # between this read and the write against an extractor on another host. When that
        # extractor wins the gap, the file is read again: an If-Match that no longer holds is
        # refused as it would have been, a write without one goes over the extractor's.
        for _ in range(_WRITE_ATTEMPTS):
            current, version = await self.store.read(account_id, scope)
            if if_match is not None and if_match != etag_of(current):
                raise StorageError(
                    PRECONDITION_FAILED,
                    "the memory file changed since it was read",
                    details={"scope": scope, "etag": etag_of(current)},
                )
            # A thread: checking and parsing a large file must not hold up renders.
            stored, records = await asyncio.to_thread(_prepared, scope, content, current)
            try:
                tag, _ = await self.store.write(account_id, scope, stored, version=version)
            except VersionConflict:
                continue
            await self.store.append_log(
                account_id, [r.model_copy(update={"version": tag, "mode": mode}) for r in records]
            )
            return MemoryFile(scope=scope, content=stored, etag=tag)
        raise StorageError(
            "memory_busy", "the memory file kept changing; try again", retryable=True
        )

    async def list(self, query: ListMemory) -> MemoryFiles:
        """Every file of the account with its size; an unreadable one is listed as such."""
        snap = await self.store.load(query.account_id)
        files = []
        for scope in snap.etags:
            doc = snap.documents.get(scope)
            info = MemoryFileInfo(
                scope=scope, skill=scope_skill(scope), etag=snap.etags.get(scope),
                readable=scope not in snap.broken,
            )  # fmt: skip
            if doc is not None:
                info.entries, info.chars = len(doc.entries), doc.chars_used()
                info.char_budget, info.updated_at = doc.char_budget, doc.updated_at
            files.append(info)
        return MemoryFiles(files=files)

    async def history(self, query: MemoryHistory) -> MemoryHistoryView:
        """The file's versions from the change log, newest first (consecutive records of one
        version are grouped; records written before versions were kept have ``version=None``)."""
        current = etag_of(await self.store.read_raw(query.account_id, query.scope))
        versions: list[MemoryVersion] = []
        for record in await self.store.read_log(query.account_id):
            if record.get("scope") != query.scope:
                continue
            change = ChangeRecord.model_validate(record)
            tag = change.version
            last = versions[-1] if versions else None
            if last is None or last.version != tag or tag is None and last.ts != change.ts:
                last = MemoryVersion(version=tag, ts=change.ts, mode=change.mode, changes=[])
                versions.append(last)
            last.changes.append(_shown(change))
        for v in versions:
            v.current = v.version is not None and v.version == current
            v.restorable = v.version is not None and (
                await self.store.version(query.account_id, query.scope, v.version) is not None
            )
        return MemoryHistoryView(scope=query.scope, versions=versions[::-1][: query.limit])


def _prepared(scope: str, content: str, current: bytes | None) -> tuple[str, list[ChangeRecord]]:
    """What a user's ``content`` is stored as over ``current``, and its change-log records;
    ``SchemaError`` when it is too large, not a memory file or holds a secret."""
    if len(content) > MAX_FILE_CHARS:
        raise SchemaError(
            "memory_too_large", f"a memory file holds at most {MAX_FILE_CHARS} characters"
        )
    if kinds := find_pii(content):
        raise SchemaError(
            "memory_contains_secret",
            "memory files may not hold secrets or personal identifiers",
            details={"kinds": sorted(set(kinds))},
        )
    old = None
    if current is not None:
        try:
            old = parse_document(current.decode("utf-8"), scope=scope)
        except (SchemaError, ValueError, UnicodeDecodeError):
            old = None  # replacing a broken file: every entry counts as added
    try:
        new = parse_document(content, scope=scope, previous=old)
    except (SchemaError, ValueError) as exc:
        raise SchemaError("memory_invalid", f"not a memory file: {exc}") from exc
    if new.scope != scope:
        raise SchemaError("memory_invalid", "the frontmatter names another scope")
    now = datetime.now(UTC)
    new.updated_at = now
    return render_document(new), _diff(scope, old, new, now)  # the user's lines as sent


def _shown(change: ChangeRecord) -> MemoryChange:
    sessions = sorted({s.session_id for s in change.sources if s.session_id})
    return MemoryChange(
        ts=change.ts, op=change.op, mode=change.mode, entry_id=change.entry_id,
        old_text=change.old_text, new_text=change.new_text, note=change.note,
        session_ids=sessions,
    )  # fmt: skip
