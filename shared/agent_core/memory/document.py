"""The memory Markdown file: YAML frontmatter plus one bullet per entry, the current truth only.

Format (entries stay editable by hand; the trailing comment holds machine fields and is never
injected)::

    ---
    scope: user
    skill: null
    updated_at: '2026-01-05T10:00:00+00:00'
    char_budget: 3000
    ---
    - 日期统一用 YYYY-MM-DD <!-- id:u1 slot:date_format=iso -->

A bullet without a comment (a user's own edit) gets the next free id when parsed. Other lines
(a user's free text) are kept verbatim as ``preamble``.
"""

from __future__ import annotations

import re
from datetime import datetime

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_core.errors import SchemaError

from .scope import SCOPE_PATTERN, USER_SCOPE, scope_skill

__all__ = [
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

_FRONTMATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.S)
_BULLET = re.compile(r"^[-*+]\s+(.*)$")
_COMMENT = re.compile(r"\s*<!--(.*?)-->\s*$")


class MemoryEntry(BaseModel):
    """One bullet: the remembered statement, in the user's language, plus machine fields."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    text: str = Field(min_length=1)
    slot: str | None = None  # "key=value", see agent_core.memory.slots
    meta: dict[str, str] = Field(default_factory=dict)  # other comment fields (src, ts), kept as is

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
    preamble: str = ""
    entries: list[MemoryEntry] = Field(default_factory=list)

    @property
    def skill(self) -> str | None:
        """The skill name, ``None`` for the user document."""
        return scope_skill(self.scope)

    def chars_used(self) -> int:
        """Characters this document adds to a prompt (bullets without comments, plus preamble)."""
        return len(self.preamble.strip()) + sum(len(e.text) + 3 for e in self.entries)

    def find(self, entry_id: str) -> MemoryEntry | None:
        """The entry with ``entry_id``, if any."""
        return next((e for e in self.entries if e.id == entry_id), None)

    def next_entry_id(self) -> str:
        """A fresh id: ``u<n>`` in the user document, ``s<n>`` in a skill document."""
        prefix = "u" if self.scope == USER_SCOPE else "s"
        numbers = [int(e.id[1:]) for e in self.entries if re.fullmatch(rf"{prefix}\d+", e.id)]
        return f"{prefix}{max(numbers, default=0) + 1}"


def new_document(scope: str) -> MemoryDocument:
    """An empty document of ``scope`` with the default budget for its kind."""
    budget = USER_CHAR_BUDGET if scope == USER_SCOPE else SKILL_CHAR_BUDGET
    return MemoryDocument(scope=scope, char_budget=budget)


def _parse_comment(raw: str) -> dict[str, str]:
    fields = {}
    for token in raw.split():
        key, sep, value = token.partition(":")
        if sep:
            fields[key] = value
    return fields


def parse_document(text: str, *, scope: str) -> MemoryDocument:
    """Parse a memory file; ``scope`` applies when the frontmatter lacks one.

    Raises ``SchemaError`` on malformed frontmatter. Entries keep their ids; bullets without one
    get the next free id, so the result can be rendered back without losing anything.
    """
    meta: dict[str, object] = {}
    body = text
    if match := _FRONTMATTER.match(text):
        try:
            loaded = yaml.safe_load(match.group(1)) or {}
        except yaml.YAMLError as exc:
            raise SchemaError(
                "memory_frontmatter", "memory file frontmatter is not YAML", cause=exc
            ) from exc
        if not isinstance(loaded, dict):
            raise SchemaError("memory_frontmatter", "memory file frontmatter is not a mapping")
        meta, body = loaded, text[match.end() :]
    doc = new_document(str(meta.get("scope") or scope))
    updates: dict[str, object] = {}
    if meta.get("char_budget") is not None:
        updates["char_budget"] = meta["char_budget"]
    if meta.get("updated_at") is not None:
        updates["updated_at"] = meta["updated_at"]
    preamble: list[str] = []
    raw_entries: list[tuple[str, dict[str, str]]] = []
    for line in body.splitlines():
        if bullet := _BULLET.match(line):
            content, fields = bullet.group(1), {}
            if comment := _COMMENT.search(content):
                fields, content = _parse_comment(comment.group(1)), content[: comment.start()]
            if content.strip():
                raw_entries.append((content, fields))
        elif line.startswith((" ", "\t")) and raw_entries and line.strip():
            raw_entries[-1] = (raw_entries[-1][0] + " " + line.strip(), raw_entries[-1][1])
        else:
            preamble.append(line)
    try:
        doc = doc.model_validate(
            {**doc.model_dump(), **updates, "preamble": "\n".join(preamble).strip()}
        )
    except ValueError as exc:
        raise SchemaError(
            "memory_frontmatter", f"invalid memory frontmatter: {exc}", cause=exc
        ) from exc
    for content, fields in raw_entries:
        entry_id = fields.pop("id", "") or doc.next_entry_id()
        if doc.find(entry_id) is not None:
            entry_id = doc.next_entry_id()
        slot = fields.pop("slot", None)
        doc.entries.append(MemoryEntry(id=entry_id, text=content, slot=slot, meta=fields))
    return doc


def render_document(doc: MemoryDocument) -> str:
    """The file text of ``doc``; ``parse_document(render_document(d))`` gives ``d`` back."""
    front = {
        "scope": doc.scope,
        "skill": doc.skill,
        "updated_at": doc.updated_at.isoformat() if doc.updated_at else None,
        "char_budget": doc.char_budget,
    }
    lines = ["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip(), "---"]
    if doc.preamble.strip():
        lines.append(doc.preamble.strip())
    for entry in doc.entries:
        fields = [f"id:{entry.id}"] + ([f"slot:{entry.slot}"] if entry.slot else [])
        fields += [f"{k}:{v}" for k, v in entry.meta.items()]
        lines.append(f"- {entry.text} <!-- {' '.join(fields)} -->")
    return "\n".join(lines) + "\n"
