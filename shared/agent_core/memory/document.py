"""The memory Markdown file: YAML frontmatter plus one bullet per entry, the current truth only.

Format — the body is the user's: every line they wrote stays exactly as written (headings, notes,
blank lines, their own bullets); the machine fields live in the frontmatter, keyed by entry id::

    ---
    scope: user
    skill: null
    updated_at: '2026-01-05T10:00:00+00:00'
    char_budget: 3000
    ids:
      u1: {h: 3fa2c1d0, slot: date_format=iso}
    ---
    ## Formats
    - 日期统一用 YYYY-MM-DD

An entry is found again by the hash of its text (``h``); a bullet the user edited in place keeps
the id of the line it replaced; a new bullet gets the next free id. Files of the earlier format
(``<!-- id:u1 slot:… -->`` after each bullet) are read as before and written in this one.

The frontmatter is loaded without aliases and within a size limit: it is user input.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any, Final

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_core.errors import SchemaError

from ._text import normalize
from .scope import SCOPE_PATTERN, USER_SCOPE, scope_skill
from .slots import detect_slots

__all__ = [
    "MAX_FILE_CHARS",
    "MAX_FRONTMATTER_CHARS",
    "MAX_FRONTMATTER_DEPTH",
    "SKILL_CHAR_BUDGET",
    "USER_CHAR_BUDGET",
    "MemoryDocument",
    "MemoryEntry",
    "new_document",
    "parse_document",
    "render_document",
]

USER_CHAR_BUDGET = 3000
SKILL_CHAR_BUDGET = 2000
# What a memory file may hold at all: work on it grows with its size (parsing, privacy checks).
MAX_FILE_CHARS = 32_000  # ten times the user file's budget
MAX_FRONTMATTER_CHARS = 16_000
MAX_FRONTMATTER_DEPTH = 16  # the service's own frontmatter nests three levels

_FRONTMATTER_OPEN = re.compile(r"---[ \t]{0,64}\n")
_FRONTMATTER_CLOSE = re.compile(r"(?m)^---[ \t]{0,64}$")
_BULLET = re.compile(r"[-*+][ \t]+(\S.*)")
# The earlier format's machine comment at the end of a bullet.
_COMMENT = re.compile(r"<!--([^<>]{0,400})-->[ \t]{0,64}$")
_KNOWN_FRONT = ("scope", "skill", "updated_at", "char_budget", "ids")


class MemoryEntry(BaseModel):
    """One bullet: the remembered statement, in the user's language, plus machine fields.

    ``raw`` is the line(s) as found in the file (kept verbatim while the text is unchanged);
    ``before`` holds the non-bullet lines just above it (headings, notes, blank lines).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    text: str = Field(min_length=1)
    slot: str | None = None  # "key=value", see agent_core.memory.slots
    raw: str | None = None
    before: list[str] = Field(default_factory=list)

    @field_validator("text")
    @classmethod
    def _one_line(cls, value: str) -> str:
        text = " ".join(value.replace("<!--", "").replace("-->", "").split())
        if not text:
            raise ValueError("entry text is empty")
        return text


class MemoryDocument(BaseModel):
    """A parsed ``user.md`` or ``skills/<name>.md``."""

    model_config = ConfigDict(extra="forbid")

    scope: str = Field(pattern=SCOPE_PATTERN)
    updated_at: datetime | None = None
    char_budget: int = Field(default=USER_CHAR_BUDGET, gt=0)
    entries: list[MemoryEntry] = Field(default_factory=list)
    trailer: list[str] = Field(default_factory=list)  # lines after the last entry
    extra: dict[str, Any] = Field(default_factory=dict)  # frontmatter keys of the user's own

    @property
    def skill(self) -> str | None:
        """The skill name, ``None`` for the user document."""
        return scope_skill(self.scope)

    def free_text(self) -> list[str]:
        """The user's non-bullet lines, in order, blank lines dropped."""
        lines = [*(line for e in self.entries for line in e.before), *self.trailer]
        return [line.strip() for line in lines if line.strip()]

    def chars_used(self) -> int:
        """Characters this document adds to a prompt (bullets and the user's other lines)."""
        return sum(len(line) + 1 for line in self.free_text()) + sum(
            len(e.text) + 3 for e in self.entries
        )

    def find(self, entry_id: str) -> MemoryEntry | None:
        """The entry with ``entry_id``, if any."""
        return next((e for e in self.entries if e.id == entry_id), None)

    def next_entry_id(self) -> str:
        """A fresh id: ``u<n>`` in the user document, ``s<n>`` in a skill document."""
        prefix = "u" if self.scope == USER_SCOPE else "s"
        numbers = [int(e.id[1:]) for e in self.entries if re.fullmatch(rf"{prefix}\d{{1,9}}", e.id)]
        return f"{prefix}{max(numbers, default=0) + 1}"

    def add_entry(self, entry: MemoryEntry) -> MemoryEntry:
        """Append ``entry`` after the last entry (below the user's text when there is none)."""
        if not self.entries and self.trailer:
            entry.before, self.trailer = [*self.trailer, *entry.before], []
        self.entries.append(entry)
        return entry

    def remove_entry(self, entry: MemoryEntry) -> None:
        """Remove ``entry``; the user's lines above it stay where they were."""
        index = self.entries.index(entry)
        self.entries.pop(index)
        if entry.before:
            if index < len(self.entries):
                self.entries[index].before[:0] = entry.before
            else:
                self.trailer[:0] = entry.before


def new_document(scope: str) -> MemoryDocument:
    """An empty document of ``scope`` with the default budget for its kind."""
    budget = USER_CHAR_BUDGET if scope == USER_SCOPE else SKILL_CHAR_BUDGET
    return MemoryDocument(scope=scope, char_budget=budget)


def text_hash(text: str) -> str:
    """The short hash that finds an entry again after a rewrite of the file."""
    return hashlib.sha256(normalize(text).encode()).hexdigest()[:10]


# libyaml's parser and emitter where PyYAML was built with it (its wheels are): a memory file is
# parsed and written on every consolidation, and the pure-Python ones were most of its time.
_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: Final[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _check_events(front: str) -> None:
    """Refuse anchors and aliases (a few bytes could expand exponentially) and nodes nested past
    :data:`MAX_FRONTMATTER_DEPTH` (the constructor recurses per level: a few thousand brackets
    would end in a ``RecursionError``, not a schema error) — read from the parser's events,
    before anything is composed. A YAML error is the caller's to report."""
    depth = 0  # the collections open around the next node
    for event in yaml.parse(front, Loader=_LOADER):
        if isinstance(event, yaml.NodeEvent):
            if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
                raise SchemaError(
                    "memory_frontmatter", "memory frontmatter may not use YAML aliases"
                )
            if depth >= MAX_FRONTMATTER_DEPTH:
                raise SchemaError(
                    "memory_frontmatter",
                    f"memory frontmatter nests deeper than {MAX_FRONTMATTER_DEPTH} levels",
                )
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_flow_depth(front: str) -> None:
    """Refuse flow brackets nested past the limit before YAML sees them: PyYAML's scanner keeps
    a possible key per open bracket and rechecks them all per token, quadratic in the brackets.
    Brackets inside quoted strings count too (conservative; the service's own frontmatter has
    one level)."""
    depth = 0
    for char in front:
        if char in "[{":
            depth += 1
            if depth > MAX_FRONTMATTER_DEPTH:
                raise SchemaError(
                    "memory_frontmatter",
                    f"memory frontmatter nests deeper than {MAX_FRONTMATTER_DEPTH} levels",
                )
        elif char in "]}" and depth:
            depth -= 1


def _split(text: str) -> tuple[dict[str, Any], str]:
    if len(text) > MAX_FILE_CHARS:
        raise SchemaError("memory_too_large", f"a memory file holds at most {MAX_FILE_CHARS} chars")
    opened = _FRONTMATTER_OPEN.match(text)
    if opened is None:
        return {}, text
    closed = _FRONTMATTER_CLOSE.search(text, opened.end(), opened.end() + MAX_FRONTMATTER_CHARS)
    if closed is None:
        if _FRONTMATTER_CLOSE.search(text, opened.end()):
            raise SchemaError("memory_frontmatter", "memory frontmatter is too long")
        return {}, text
    front = text[opened.end() : closed.start()]
    _check_flow_depth(front)
    try:
        _check_events(front)
        loaded = yaml.load(front, Loader=_LOADER) or {}
    except yaml.YAMLError as exc:
        raise SchemaError(
            "memory_frontmatter", "memory file frontmatter is not YAML", cause=exc
        ) from exc
    if not isinstance(loaded, dict):
        raise SchemaError("memory_frontmatter", "memory file frontmatter is not a mapping")
    body = text[closed.end() :]
    return loaded, body[1:] if body.startswith("\n") else body


def _comment_fields(raw: str) -> dict[str, str]:
    fields = {}
    for token in raw.split():
        key, sep, value = token.partition(":")
        if sep:
            fields[key] = value
    return fields


def _known_ids(meta: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(id, hash, slot) of the frontmatter's ``ids`` map, in file order; malformed ones skipped."""
    ids = meta.get("ids")
    if not isinstance(ids, dict):
        return []
    out = []
    for key, value in ids.items():
        if not (isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_\-]{1,40}", key)):
            continue
        value = value if isinstance(value, dict) else {}
        slot = value.get("slot")
        out.append((key, str(value.get("h", "")), slot if isinstance(slot, str) else None))
    return out


def _body_entries(body: str) -> tuple[list[tuple[str, str, dict[str, str], list[str]]], list[str]]:
    """(text, raw, legacy comment fields, lines before) per bullet, and the trailing lines."""
    found: list[tuple[str, str, dict[str, str], list[str]]] = []
    pending: list[str] = []
    for line in body.split("\n"):
        bullet = _BULLET.match(line)
        if bullet:
            content, raw, fields = bullet.group(1), line, {}
            if comment := _COMMENT.search(content):
                fields = _comment_fields(comment.group(1))
                content = content[: comment.start()]
                raw = line[: len(line) - len(bullet.group(1)) + comment.start()].rstrip()
            if content.strip():
                found.append((content, raw, fields, pending))
                pending = []
                continue
        if line.startswith((" ", "\t")) and line.strip() and found and not pending:
            text, raw, fields, before = found[-1]
            found[-1] = (f"{text} {line.strip()}", f"{raw}\n{line}", fields, before)
            continue
        pending.append(line)
    while pending and not pending[-1]:
        pending.pop()  # the file's final newline, not a line of its own
    return found, pending


def _single_slot(text: str) -> str | None:
    slots = detect_slots(text)
    return f"{slots[0].key}={slots[0].value}" if len(slots) == 1 else None


def _assign_ids(
    doc: MemoryDocument,
    found: list[tuple[str, str, dict[str, str], list[str]]],
    known: list[tuple[str, str, str | None]],
) -> None:
    by_hash: dict[str, tuple[str, str | None]] = {}
    for known_id, h, known_slot in known:
        by_hash.setdefault(h, (known_id, known_slot))
    position = {i: k for i, k in enumerate(known)}
    hashes = [text_hash(text) for text, *_ in found]
    matched = {by_hash[h][0] for h in hashes if h in by_hash}
    used: set[str] = set()
    for i, (text, raw, fields, before) in enumerate(found):
        entry_id: str | None = fields.get("id")
        slot: str | None = fields.get("slot")
        if (entry_id is None or entry_id in used) and hashes[i] in by_hash:
            entry_id, slot = by_hash[hashes[i]][0], slot or by_hash[hashes[i]][1]
        if entry_id is None or entry_id in used:
            # Edited in place: the line at this position keeps its id, its slot is read anew.
            old = position.get(i)
            entry_id = old[0] if old and old[0] not in matched and old[0] not in used else None
            slot = slot or _single_slot(text)
        if entry_id is None or entry_id in used or doc.find(entry_id) is not None:
            entry_id = doc.next_entry_id()
        used.add(entry_id)
        doc.entries.append(
            MemoryEntry(id=entry_id, text=text, slot=slot, raw=raw, before=list(before))
        )


def parse_document(
    text: str, *, scope: str, previous: MemoryDocument | None = None
) -> MemoryDocument:
    """Parse a memory file; ``scope`` applies when the frontmatter lacks one.

    ``previous`` (the file this text replaces) lends its ids when the text carries none, so a
    user who pastes a file without its frontmatter keeps the ids of the lines they kept.

    Raises ``SchemaError`` on malformed, aliased or oversized frontmatter and on a file over
    :data:`MAX_FILE_CHARS`. ``render_document`` of the result gives the body back line for line.
    """
    meta, body = _split(text)
    doc = new_document(str(meta.get("scope") or scope))
    updates: dict[str, object] = {
        "extra": {k: v for k, v in meta.items() if k not in _KNOWN_FRONT and isinstance(k, str)}
    }
    if meta.get("char_budget") is not None:
        updates["char_budget"] = meta["char_budget"]
    if meta.get("updated_at") is not None:
        updates["updated_at"] = meta["updated_at"]
    try:
        doc = doc.model_validate({**doc.model_dump(), **updates})
    except ValueError as exc:
        raise SchemaError(
            "memory_frontmatter", f"invalid memory frontmatter: {exc}", cause=exc
        ) from exc
    found, trailer = _body_entries(body)
    known = _known_ids(meta)
    if not known and previous is not None:
        known = [(e.id, text_hash(e.text), e.slot) for e in previous.entries]
    _assign_ids(doc, found, known)
    doc.trailer = trailer
    return doc


def _text_of(raw: str) -> str:
    first, *rest = raw.split("\n")
    bullet = _BULLET.match(first)
    content = bullet.group(1) if bullet else first
    return " ".join(" ".join([content, *rest]).split())


def _line(entry: MemoryEntry) -> str:
    """The entry's line: as the user wrote it while its text is unchanged, else rewritten."""
    if entry.raw is not None and _text_of(entry.raw) == entry.text:
        return entry.raw
    return f"- {entry.text}"


def render_document(doc: MemoryDocument) -> str:
    """The file text of ``doc``: the user's lines verbatim, changed entries rewritten."""
    ids = {
        e.id: {"h": text_hash(e.text), **({"slot": e.slot} if e.slot else {})} for e in doc.entries
    }
    front = {
        "scope": doc.scope,
        "skill": doc.skill,
        "updated_at": doc.updated_at.isoformat() if doc.updated_at else None,
        "char_budget": doc.char_budget,
        **doc.extra,
        "ids": ids,
    }
    dumped = yaml.dump(
        front, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, default_flow_style=None
    )
    lines = ["---", dumped.strip(), "---"]
    for entry in doc.entries:
        lines.extend(entry.before)
        lines.append(_line(entry))
    lines.extend(doc.trailer)
    return "\n".join(lines) + "\n"
