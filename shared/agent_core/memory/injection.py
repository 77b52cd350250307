"""The memory block a run starts with: user memory plus the enabled skills' memory.

Its heading, precedence note and section titles are in the user's language, English by default:
the account's setting (``language: zh|en`` in the frontmatter of its ``user.md``) wins, then the
reply language the user asked for (a ``reply_language`` entry), then the language the user's
entries are written in.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._text import Language, detect_language
from .document import MemoryDocument

__all__ = [
    "INJECTION_HEADING",
    "INJECTION_HEADINGS",
    "INJECTION_NOTE",
    "INJECTION_NOTES",
    "injection_language",
    "render_injection",
]

INJECTION_HEADINGS: dict[Language, str] = {"en": "# Personal memory", "zh": "# 个性化记忆"}
# The current turn's explicit request wins: memory is a default, never an override.
INJECTION_NOTES: dict[Language, str] = {
    "en": (
        "Long-term preferences and lessons gathered from earlier conversations. Where one conflicts"
        " with an explicit request in the user's current turn, the current request wins."
    ),
    "zh": "以下是从以往对话整理的长期偏好与经验。若与用户本轮的明确要求冲突，以本轮要求为准。",
}
_TITLES: dict[Language, tuple[str, str]] = {
    "en": ("User preferences", "Skill: {}"),
    "zh": ("用户偏好", "技能：{}"),
}
INJECTION_HEADING = INJECTION_HEADINGS["en"]
INJECTION_NOTE = INJECTION_NOTES["en"]


def injection_language(
    user_doc: MemoryDocument | None, skill_docs: Sequence[MemoryDocument] = ()
) -> Language:
    """The language the block is rendered in (see the module docstring); ``en`` by default."""
    setting = str(user_doc.extra.get("language", "")).casefold() if user_doc else ""
    if setting in ("zh", "en"):
        return "zh" if setting == "zh" else "en"
    for entry in user_doc.entries if user_doc else ():
        if entry.slot and entry.slot.startswith("reply_language="):
            return "zh" if entry.slot.endswith("=zh") else "en"
    docs = [user_doc] if user_doc is not None and user_doc.entries else list(skill_docs)
    text = "\n".join(e.text for d in docs for e in d.entries)
    return detect_language(text) if text.strip() else "en"


def _section(title: str, doc: MemoryDocument) -> list[str]:
    body: list[str] = []
    for entry in doc.entries:
        body += [line.strip() for line in entry.before if line.strip()]
        body.append(f"- {entry.text}")
    body += [line.strip() for line in doc.trailer if line.strip()]
    return [f"## {title}", *body, ""] if body else []


def render_injection(
    user_doc: MemoryDocument | None,
    skill_docs: Sequence[MemoryDocument],
    language: Language | None = None,
) -> str:
    """The memory text for a run, or ``""`` when there is nothing to inject.

    Pass only the documents of the skills enabled for this run; ``language`` overrides the
    language the block would follow. Machine comments are not part of entry text, so nothing but
    the statements and the precedence note reaches the prompt.
    """
    lang = language or injection_language(user_doc, skill_docs)
    user_title, skill_title = _TITLES[lang]
    lines: list[str] = []
    if user_doc is not None:
        lines += _section(user_title, user_doc)
    for doc in sorted(skill_docs, key=lambda d: d.scope):
        lines += _section(skill_title.format(doc.skill), doc)
    if not lines:
        return ""
    heading, note = INJECTION_HEADINGS[lang], INJECTION_NOTES[lang]
    return "\n".join([heading, note, "", *lines]).rstrip() + "\n"
