"""The memory files as the API shows them: models only, so the HTTP SDK that reads them loads
no bus client (:mod:`agent_core.memory.client` asks the memory service for them)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MemoryChange",
    "MemoryFile",
    "MemoryFileInfo",
    "MemoryFiles",
    "MemoryHistoryView",
    "MemoryVersion",
    "RenderedMemory",
]


class MemoryFile(BaseModel):
    """One memory file as the API sees it: raw Markdown and its ETag (``None``: no file yet)."""

    model_config = ConfigDict(extra="forbid")

    scope: str
    content: str
    etag: str | None = None


class MemoryFileInfo(BaseModel):
    """One memory file in a listing."""

    model_config = ConfigDict(extra="forbid")

    scope: str
    skill: str | None = None
    etag: str | None = None
    entries: int = 0
    chars: int = 0
    char_budget: int = 0
    updated_at: datetime | None = None
    readable: bool = True  # False: the file on disk does not parse (fix it by hand or PUT)


class MemoryFiles(BaseModel):
    """The memory files of an account: ``user`` first, then the skills sorted."""

    model_config = ConfigDict(extra="forbid")

    files: list[MemoryFileInfo]


class MemoryChange(BaseModel):
    """One change-log record as the API shows it (texts are scrubbed at write time)."""

    model_config = ConfigDict(extra="forbid")

    ts: datetime
    op: str
    mode: str
    entry_id: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    note: str | None = None
    session_ids: list[str] = Field(default_factory=list)


class MemoryVersion(BaseModel):
    """One version of a file: the changes that made it and whether it can be restored."""

    model_config = ConfigDict(extra="forbid")

    version: str | None  # the file's ETag after these changes (None: before versions were kept)
    ts: datetime
    mode: str
    current: bool = False
    restorable: bool = False
    changes: list[MemoryChange]


class MemoryHistoryView(BaseModel):
    """The history of one file, newest version first."""

    model_config = ConfigDict(extra="forbid")

    scope: str
    versions: list[MemoryVersion]


class RenderedMemory(BaseModel):
    """The injection text of a run (``""`` when the account has no memory)."""

    model_config = ConfigDict(extra="forbid")

    text: str
