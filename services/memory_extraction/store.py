"""The memory files of each account, kept in the file store: the only code that writes them.

Keys (the ``local`` engine keeps them as files below the home, today's layout):
``accounts/<account_id>/memory/user.md``, ``…/memory/skills/<skill>.md``, the change log
``…/memory/changes.jsonl`` and the last versions of each file
``…/memory/.versions/<user|skills.<skill>>/<etag>.md`` (what a restore writes back). Every write
is atomic (a reader sees the old file or the new one) and conditional on the version it was
computed from (``If-Match`` on the object's ETag in ``s3``; the ``local`` engine's checked
replace under a folder lock): two memory-extraction processes, on one host or two, that change
one file at once cannot both win; the loser gets :class:`~agent_core.files.VersionConflict`, reads
again and redoes its change, so no edit is lost. The change log grows the same way (read, add
the lines, write if unchanged).

Two tags per file: the API's ETag is the SHA-256 of the bytes (:func:`etag_of`, what a user's
``If-Match`` names and what a history version is called); the store's version (its ETag) is
what a conditional write names. The first is stable across engines; the second is the engine's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from agent_core.errors import SchemaError, StorageError, redact
from agent_core.files import FileStore, FileStoreError, VersionConflict, put_if, read_versioned
from agent_core.files.local import LocalFileStore
from agent_core.memory import MemoryDocument, parse_document, scrub_text
from agent_core.memory.scope import SCOPE_PATTERN, USER_SCOPE, scope_skill, skill_scope
from agent_core.recent import Recent

__all__ = [
    "ACCOUNT_PATTERN",
    "KEEP_VERSIONS",
    "ChangeRecord",
    "MemoryStore",
    "Snapshot",
    "Source",
    "etag_of",
]

log = logging.getLogger(__name__)

ACCOUNT_PATTERN = re.compile(r"^[A-Za-z0-9_\-]{1,128}$")
_SCOPE = re.compile(SCOPE_PATTERN)
CHANGE_LOG = "changes.jsonl"
VERSIONS = ".versions"
KEEP_VERSIONS = 50  # per file, at least; the change log itself is kept whole
# Versions allowed beyond KEEP_VERSIONS before the oldest are deleted: the folder is listed once
# per this many writes, not on every write (a LIST request each on an object store).
PRUNE_SLACK: Final = 10
# Files whose parse, and versions folders whose count, one process keeps (least recently used
# go first): a team's accounts fit, a million of them do not grow the process.
CACHED_FILES: Final = 1024
_ETAG = re.compile(r"^[0-9a-f]{32}$")


def etag_of(data: bytes | None) -> str | None:
    """The ETag of a file's bytes (``None`` for a file that does not exist)."""
    return None if data is None else hashlib.sha256(data).hexdigest()[:32]


class Source(BaseModel):
    """Where a change came from: the interaction's session and run (provenance only)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str | None = None
    run_id: str | None = None
    interaction_id: str | None = None


class ChangeRecord(BaseModel):
    """One line of the change log: what changed, from which session/run, when. Never a secret."""

    model_config = ConfigDict(extra="forbid")

    ts: datetime
    scope: str
    op: str
    mode: str  # llm, fallback, api, restore, compaction
    entry_id: str | None = None
    version: str | None = None  # the ETag of the file this change produced
    old_text: str | None = None
    new_text: str | None = None
    note: str | None = None
    sources: list[Source] = Field(default_factory=list)

    def scrubbed(self) -> ChangeRecord:
        """A copy whose texts are masked: a hand-written secret must not reach the log either."""
        clean = {
            k: redact(scrub_text(_capped(v))) if isinstance(v, str) else v
            for k, v in (("old_text", self.old_text), ("new_text", self.new_text))
        }
        return self.model_copy(update=clean)


_LOGGED_CHARS = 2_000  # of one entry's text in the change log (entries are short; files are not)


def _capped(text: str) -> str:
    return text if len(text) <= _LOGGED_CHARS else text[: _LOGGED_CHARS - 1] + "…"


@dataclass
class Snapshot:
    """The documents of one account as read at one moment, with each file's ETag.

    ``etags`` has an entry for every scope that was looked at (``None`` = no file) and
    ``versions`` the store's version of the same bytes (what a conditional write names);
    ``broken`` holds scopes whose file could not be parsed: they are never overwritten by a
    consolidation.
    """

    documents: dict[str, MemoryDocument] = field(default_factory=dict)
    etags: dict[str, str | None] = field(default_factory=dict)
    versions: dict[str, str | None] = field(default_factory=dict)
    broken: set[str] = field(default_factory=set)


class MemoryStore:
    """Reads and writes the memory files of one file store; one instance per process.

    ``files`` is the configured store, or a home folder (the ``local`` engine on it: the
    offline tools and tests)."""

    def __init__(self, files: FileStore | str | os.PathLike[str]) -> None:
        self.files: FileStore = (
            LocalFileStore(files) if isinstance(files, str | os.PathLike) else files
        )
        # An account's lock lives while someone holds or awaits it (they reference it), so the
        # map never outgrows the accounts at work; a lock nobody references has nobody to
        # exclude, and the next caller gets a fresh one.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        # The last CACHED_FILES files parsed, least recently used first (a miss re-parses).
        self._parsed: Recent[tuple[str, str], tuple[str, MemoryDocument]] = Recent(CACHED_FILES)
        # Versions folder -> at most how many versions it holds, as this process last listed
        # it and wrote since (another process's writes make it low: the folder is then listed
        # and pruned a little later, never wrongly, since what is deleted comes from a listing).
        # The last CACHED_FILES folders written; one forgotten is listed again at its next write.
        self._kept: Recent[str, int] = Recent(CACHED_FILES)

    # -- keys --------------------------------------------------------------------------------

    def memory_key(self, account_id: str) -> str:
        """``accounts/<account_id>/memory``; refuses ids that could leave the account's keys."""
        if not ACCOUNT_PATTERN.fullmatch(account_id):
            raise SchemaError("invalid_account", "account id must match [A-Za-z0-9_-]{1,128}")
        return f"accounts/{account_id}/memory"

    def key(self, account_id: str, scope: str) -> str:
        """The key of the file of ``scope`` (``user`` or ``skill:<name>``)."""
        if not _SCOPE.fullmatch(scope) or scope.endswith((":.", ":..")):
            raise SchemaError("invalid_scope", "scope must be 'user' or 'skill:<name>'")
        base = self.memory_key(account_id)
        skill = scope_skill(scope)
        return f"{base}/user.md" if skill is None else f"{base}/skills/{skill}.md"

    async def scopes(self, account_id: str) -> list[str]:
        """The scopes that have a file: ``user`` first, then the skills sorted (the user file's
        head and the skills' listing asked at once: one wait, not two)."""
        user, skills = await asyncio.gather(
            self.files.head(self.key(account_id, USER_SCOPE)), self._skills(account_id)
        )
        return [USER_SCOPE, *skills] if user is not None else skills

    async def _skills(self, account_id: str) -> list[str]:
        """The skill scopes that have a file, sorted: a listing of the skills' folder alone,
        not of the whole memory folder, whose kept versions (fifty a file and more) and change
        log it would walk too."""
        prefix = f"{self.memory_key(account_id)}/skills"
        found = []
        for o in await self.files.list(prefix, limit=100_000):
            name = o.key.removeprefix(f"{prefix}/")
            if "/" not in name and name.endswith(".md"):
                scope = skill_scope(name.removesuffix(".md"))
                if _SCOPE.fullmatch(scope):
                    found.append(scope)
        return found

    def lock(self, account_id: str) -> asyncio.Lock:
        """The in-process lock that serialises commits and API writes of one account (other
        processes are kept apart by the conditional writes)."""
        return self._locks.setdefault(account_id, asyncio.Lock())

    # -- reading -----------------------------------------------------------------------------

    async def read(self, account_id: str, scope: str) -> tuple[bytes | None, str | None]:
        """The file's bytes and the store's version of them, ``(None, None)`` when absent."""
        return await read_versioned(self.files, self.key(account_id, scope))

    async def read_raw(self, account_id: str, scope: str) -> bytes | None:
        """The file's bytes, or ``None`` when it does not exist."""
        return (await self.read(account_id, scope))[0]

    def document(
        self, account_id: str, scope: str, data: bytes, tag: str | None = None
    ) -> MemoryDocument:
        """``data`` parsed (cached by content hash: renders re-read files on every run);
        ``tag``, when the caller has it already, is ``etag_of(data)``."""
        tag = tag or etag_of(data) or ""
        cached = self._parsed.get((account_id, scope))
        if cached is not None and cached[0] == tag:
            return cached[1]
        doc = parse_document(data.decode("utf-8"), scope=scope)
        self._parsed.put((account_id, scope), (tag, doc))
        return doc

    async def load(self, account_id: str, scopes: Iterable[str] | None = None) -> Snapshot:
        """A snapshot of ``scopes`` (default: every file of the account)."""
        snap = Snapshot()
        # Every file: the user file is read with the skills' (one trip for all), and looked at
        # only if it is there, as a listing would have found it.
        wanted = [USER_SCOPE, *await self._skills(account_id)] if scopes is None else list(scopes)
        found = await self.files.get_many([self.key(account_id, s) for s in wanted])
        for scope, got in zip(wanted, found, strict=True):
            if got is None and scopes is None and scope == USER_SCOPE:
                continue
            data, version = got if got is not None else (None, None)
            tag = snap.etags[scope] = etag_of(data)
            snap.versions[scope] = version
            if data is None:
                continue
            try:
                snap.documents[scope] = self.document(account_id, scope, data, tag)
            except (SchemaError, UnicodeDecodeError, ValueError) as exc:
                log.warning("memory file %s of %s unreadable: %s", scope, account_id, exc)
                snap.broken.add(scope)
        return snap

    # -- writing -----------------------------------------------------------------------------

    async def write(
        self, account_id: str, scope: str, text: str, *, version: str | None
    ) -> tuple[str, str | None]:
        """Replace the file if the store still holds ``version`` of it (``None``: only if there
        is no file); the new file's ETag and store version. Raises ``VersionConflict`` when
        another writer changed it meanwhile (nothing written), ``StorageError``
        ``memory_write_failed`` when the store refused the write."""
        data = text.encode("utf-8")
        try:
            stored = await put_if(self.files, self.key(account_id, scope), data, version)
        except VersionConflict:
            raise
        except FileStoreError as exc:
            if exc.retryable:
                raise
            raise StorageError("memory_write_failed", f"could not write {scope}") from exc
        tag = etag_of(data)
        assert tag is not None
        await self._keep_version(account_id, scope, tag, data)
        return tag, stored

    # -- versions ------------------------------------------------------------------------------

    def _versions_key(self, account_id: str, scope: str) -> str:
        self.key(account_id, scope)  # validates the account and the scope
        skill = scope_skill(scope)
        name = "user" if skill is None else f"skills.{skill}"
        return f"{self.memory_key(account_id)}/{VERSIONS}/{name}"

    async def _keep_version(self, account_id: str, scope: str, tag: str, data: bytes) -> None:
        """Keep the bytes of this version (best effort: a version is an aid, never a failure).

        The newest ``KEEP_VERSIONS`` are always kept. The folder is listed at this process's
        first write to it and whenever it may hold ``KEEP_VERSIONS + PRUNE_SLACK`` since, and
        the versions beyond the newest ``KEEP_VERSIONS`` are then deleted."""
        folder = self._versions_key(account_id, scope)
        try:
            key = f"{folder}/{tag}.md"
            # Not synced: the name is the bytes' hash, so a copy a crash left torn is told
            # apart when read (``version``), and the write costs no second fsync.
            await self.files.put(key, data, sync=False)
            known = self._kept.get(folder)
            if known is not None and known < KEEP_VERSIONS + PRUNE_SLACK:
                # A rewrite of the same bytes adds none: counted anyway, harmlessly.
                self._kept.put(folder, known + 1)
                return
            kept = await self.files.list(folder, limit=100_000)
            if len(kept) > KEEP_VERSIONS:
                # Oldest first; the version just written last among those of its time (an object
                # store's times are whole seconds: several versions may share one).
                kept.sort(key=lambda o: (o.modified_at, o.key == key))
                await self.files.delete(o.key for o in kept[:-KEEP_VERSIONS])
                kept = kept[-KEEP_VERSIONS:]
            self._kept.put(folder, len(kept))
        except FileStoreError as exc:
            log.warning("memory version of %s not kept: %s", scope, exc.code)

    async def version(self, account_id: str, scope: str, tag: str) -> bytes | None:
        """The bytes of an earlier version of the file (``None`` when it is not kept)."""
        if not _ETAG.fullmatch(tag):
            return None
        key = f"{self._versions_key(account_id, scope)}/{tag}.md"
        data = (await read_versioned(self.files, key))[0]
        return data if etag_of(data) == tag else None  # a torn copy is not that version

    async def append_log(self, account_id: str, records: Iterable[ChangeRecord]) -> None:
        """Append ``records`` (scrubbed) to the account's change log, one JSON line each: a
        conditional rewrite of the log, retried when another writer appended first."""
        lines = [
            json.dumps(r.scrubbed().model_dump(mode="json", exclude_none=True), ensure_ascii=False)
            for r in records
        ]
        if not lines:
            return
        key = f"{self.memory_key(account_id)}/{CHANGE_LOG}"
        added = ("\n".join(lines) + "\n").encode("utf-8")
        try:
            await self.files.append_lines(key, added)
        except VersionConflict:
            raise StorageError(
                "memory_write_failed", "the change log kept changing; not appended"
            ) from None

    async def read_log(self, account_id: str) -> list[dict[str, Any]]:
        """The change log's records, oldest first (a torn last line is skipped)."""
        key = f"{self.memory_key(account_id)}/{CHANGE_LOG}"
        data = (await read_versioned(self.files, key))[0]
        if data is None:
            return []
        records = []
        for line in data.decode("utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
        return records
