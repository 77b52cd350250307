"""The memory files of each account on disk: the only code that writes them.

Layout: ``<home>/accounts/<account_id>/memory/user.md``, ``…/memory/skills/<skill>.md``, the
change log ``…/memory/changes.jsonl`` and the last versions of each file
``…/memory/.versions/<user|skills.<skill>>/<etag>.md`` (what a restore writes back). Files are replaced atomically (temp file in the same
directory, fsync, rename), so a reader — the API, an editor, a render — sees the old file or the
new one, never half of one. A file's ETag is the SHA-256 of its bytes: the same value serves the
API's If-Match and the consolidation's compare-and-swap.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_core.errors import SchemaError, StorageError, redact
from agent_core.memory import MemoryDocument, parse_document, scrub_text
from agent_core.memory.scope import SCOPE_PATTERN, USER_SCOPE, scope_skill, skill_scope

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
KEEP_VERSIONS = 50  # per file; the change log itself is kept whole
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

    ``etags`` has an entry for every scope that was looked at (``None`` = no file); ``broken``
    holds scopes whose file could not be parsed: they are never overwritten by a consolidation.
    """

    documents: dict[str, MemoryDocument] = field(default_factory=dict)
    etags: dict[str, str | None] = field(default_factory=dict)
    broken: set[str] = field(default_factory=set)


class MemoryStore:
    """Reads and writes one home's memory files; one instance per process."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._locks: dict[str, asyncio.Lock] = {}
        self._parsed: dict[tuple[str, str], tuple[str, MemoryDocument]] = {}

    # -- paths -------------------------------------------------------------------------------

    def memory_dir(self, account_id: str) -> Path:
        """``<home>/accounts/<account_id>/memory``; refuses ids that could leave the home."""
        if not ACCOUNT_PATTERN.fullmatch(account_id):
            raise SchemaError("invalid_account", "account id must match [A-Za-z0-9_-]{1,128}")
        return self.home / "accounts" / account_id / "memory"

    def path(self, account_id: str, scope: str) -> Path:
        """The file of ``scope`` (``user`` or ``skill:<name>``)."""
        if not _SCOPE.fullmatch(scope) or scope.endswith((":.", ":..")):
            raise SchemaError("invalid_scope", "scope must be 'user' or 'skill:<name>'")
        base = self.memory_dir(account_id)
        skill = scope_skill(scope)
        return base / "user.md" if skill is None else base / "skills" / f"{skill}.md"

    def scopes(self, account_id: str) -> list[str]:
        """The scopes that have a file: ``user`` first, then the skills sorted."""
        base = self.memory_dir(account_id)
        found = [USER_SCOPE] if (base / "user.md").is_file() else []
        skills = base / "skills"
        if skills.is_dir():
            for p in sorted(skills.glob("*.md")):
                scope = skill_scope(p.stem)
                if _SCOPE.fullmatch(scope):
                    found.append(scope)
        return found

    def lock(self, account_id: str) -> asyncio.Lock:
        """The in-process lock that serialises commits and API writes of one account."""
        return self._locks.setdefault(account_id, asyncio.Lock())

    # -- reading -----------------------------------------------------------------------------

    def read_raw(self, account_id: str, scope: str) -> bytes | None:
        """The file's bytes, or ``None`` when it does not exist."""
        try:
            return self.path(account_id, scope).read_bytes()
        except FileNotFoundError:
            return None

    def document(self, account_id: str, scope: str, data: bytes) -> MemoryDocument:
        """``data`` parsed (cached by content hash: renders re-read files on every run)."""
        tag = etag_of(data) or ""
        cached = self._parsed.get((account_id, scope))
        if cached is not None and cached[0] == tag:
            return cached[1]
        doc = parse_document(data.decode("utf-8"), scope=scope)
        self._parsed[(account_id, scope)] = (tag, doc)
        return doc

    def load(self, account_id: str, scopes: Iterable[str] | None = None) -> Snapshot:
        """A snapshot of ``scopes`` (default: every file of the account)."""
        snap = Snapshot()
        for scope in self.scopes(account_id) if scopes is None else scopes:
            data = self.read_raw(account_id, scope)
            snap.etags[scope] = etag_of(data)
            if data is None:
                continue
            try:
                snap.documents[scope] = self.document(account_id, scope, data)
            except (SchemaError, UnicodeDecodeError, ValueError) as exc:
                log.warning("memory file %s of %s unreadable: %s", scope, account_id, exc)
                snap.broken.add(scope)
        return snap

    # -- writing -----------------------------------------------------------------------------

    def write(self, account_id: str, scope: str, text: str) -> str:
        """Replace the file atomically; return the new ETag."""
        path = self.path(account_id, scope)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StorageError("memory_write_failed", f"could not write {path.name}") from exc
        _fsync_dir(path.parent)
        tag = etag_of(data)
        assert tag is not None
        self._keep_version(account_id, scope, tag, data)
        return tag

    # -- versions ------------------------------------------------------------------------------

    def _versions_dir(self, account_id: str, scope: str) -> Path:
        self.path(account_id, scope)  # validates the account and the scope
        skill = scope_skill(scope)
        name = "user" if skill is None else f"skills.{skill}"
        return self.memory_dir(account_id) / VERSIONS / name

    def _keep_version(self, account_id: str, scope: str, tag: str, data: bytes) -> None:
        """Keep the bytes of this version (best effort: a version is an aid, never a failure)."""
        folder = self._versions_dir(account_id, scope)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{tag}.md").write_bytes(data)
            kept = sorted(folder.glob("*.md"), key=lambda p: p.stat().st_mtime_ns)
            for old in kept[:-KEEP_VERSIONS]:
                old.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("memory version of %s not kept: %s", scope, type(exc).__name__)

    def version(self, account_id: str, scope: str, tag: str) -> bytes | None:
        """The bytes of an earlier version of the file (``None`` when it is not kept)."""
        if not _ETAG.fullmatch(tag):
            return None
        try:
            return (self._versions_dir(account_id, scope) / f"{tag}.md").read_bytes()
        except FileNotFoundError:
            return None

    def append_log(self, account_id: str, records: Iterable[ChangeRecord]) -> None:
        """Append ``records`` (scrubbed) to the account's change log, one JSON line each."""
        lines = [
            json.dumps(r.scrubbed().model_dump(mode="json", exclude_none=True), ensure_ascii=False)
            for r in records
        ]
        if not lines:
            return
        path = self.memory_dir(account_id) / CHANGE_LOG
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def read_log(self, account_id: str) -> list[dict[str, Any]]:
        """The change log's records, oldest first (a torn last line is skipped)."""
        path = self.memory_dir(account_id) / CHANGE_LOG
        if not path.exists():
            return []
        records = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
        return records


def _fsync_dir(path: Path) -> None:
    # The rename is durable only once the directory entry is on disk.
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
