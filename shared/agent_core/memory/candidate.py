"""The typed candidate memories that detection emits and consolidation reads."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from ._text import Language
from .scope import SCOPE_PATTERN

__all__ = ["Signal", "SignalKind", "SlotValue"]


class SignalKind(StrEnum):
    """Why a statement may be worth remembering."""

    EXPLICIT = "explicit"  # a durable marker: 记住, 以后, always, from now on, …
    CORRECTION = "correction"  # 不对, 之前说过, that's wrong, I told you …
    FACT = "fact"  # a statement about the user, their business or data ("our FY starts in April")
    FORGET = "forget"  # the user asks to drop a memory; ``text`` is the topic
    STATEMENT = "statement"  # mentions a skill/format without a marker: a hint, not a memory
    TOOL_LESSON = "tool_lesson"  # a failed call followed by a changed call that succeeded
    # A changed value said without a marker ("Sixty days is the window now", "汇率改成…"): written
    # only over the entry about the same thing, never added on its own.
    REVISION = "revision"


class SlotValue(BaseModel):
    """A preference slot read from a statement (see :mod:`agent_core.memory.slots`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    value: str


class Signal(BaseModel):
    """One candidate memory: a scrubbed statement, its scope and what triggered it."""

    model_config = ConfigDict(extra="forbid")

    kind: SignalKind
    scope: str = Field(pattern=SCOPE_PATTERN)
    text: str
    sentence: str
    language: Language
    markers: list[str] = Field(default_factory=list)
    slots: list[SlotValue] = Field(default_factory=list)
