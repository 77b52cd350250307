"""Memory extraction, pure logic: signal detection, privacy, rule consolidation, memory files.

The memory-extraction service wires these to the bus and the disk:

- :func:`detect_signals` — candidate memories of one :class:`Interaction` (user turns and tool
  results only; questions, hypotheticals, quotations, one-off requests vetoed; secrets scrubbed);
- :func:`consolidate_fallback` — rule-based :class:`MemoryUpdateBatch` when the LLM path fails;
- :func:`apply_updates` — applies any batch (LLM or rules) with the update guards;
- :func:`parse_document` / :func:`render_document` / :func:`compact` — the Markdown files;
- :func:`render_injection` — the memory block for a run (``# Personal memory``, or
  ``# 个性化记忆`` for a Chinese-speaking user).
"""

from .candidate import Signal, SignalKind, SlotValue
from .compaction import CompactionReport, compact
from .document import (
    SKILL_CHAR_BUDGET,
    USER_CHAR_BUDGET,
    MemoryDocument,
    MemoryEntry,
    new_document,
    parse_document,
    render_document,
)
from .fallback import consolidate_fallback
from .injection import (
    INJECTION_HEADING,
    INJECTION_HEADINGS,
    INJECTION_NOTE,
    INJECTION_NOTES,
    injection_language,
    render_injection,
)
from .interaction import Interaction, Turn, TurnRole
from .privacy import find_pii, scrub_statement, scrub_text
from .scope import USER_SCOPE, resolve_scope, skill_scope
from .signals import detect_signals, has_memory_signal
from .updates import (
    AppliedChange,
    ApplyResult,
    MemoryUpdate,
    MemoryUpdateBatch,
    UpdateOp,
    apply_updates,
)

__all__ = [
    "INJECTION_HEADING",
    "INJECTION_HEADINGS",
    "INJECTION_NOTE",
    "INJECTION_NOTES",
    "SKILL_CHAR_BUDGET",
    "USER_CHAR_BUDGET",
    "USER_SCOPE",
    "AppliedChange",
    "ApplyResult",
    "CompactionReport",
    "Interaction",
    "MemoryDocument",
    "MemoryEntry",
    "MemoryUpdate",
    "MemoryUpdateBatch",
    "Signal",
    "SignalKind",
    "SlotValue",
    "Turn",
    "TurnRole",
    "UpdateOp",
    "apply_updates",
    "compact",
    "consolidate_fallback",
    "detect_signals",
    "find_pii",
    "has_memory_signal",
    "injection_language",
    "new_document",
    "parse_document",
    "render_document",
    "render_injection",
    "resolve_scope",
    "scrub_statement",
    "scrub_text",
    "skill_scope",
]
