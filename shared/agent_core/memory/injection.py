"""The ``# 个性化记忆`` block a run starts with: user memory plus the enabled skills' memory."""

from __future__ import annotations

from collections.abc import Sequence

from .document import MemoryDocument

__all__ = ["INJECTION_HEADING", "INJECTION_NOTE", "render_injection"]

INJECTION_HEADING = "# 个性化记忆"
# The current turn's explicit request wins: memory is a default, never an override.
INJECTION_NOTE = (
    "以下是从以往对话整理的长期偏好与经验。若与用户本轮的明确要求冲突，以本轮要求为准。"
)


def _section(title: str, doc: MemoryDocument) -> list[str]:
    body: list[str] = []
    for entry in doc.entries:
        body += [line.strip() for line in entry.before if line.strip()]
        body.append(f"- {entry.text}")
    body += [line.strip() for line in doc.trailer if line.strip()]
    return [f"## {title}", *body, ""] if body else []


def render_injection(user_doc: MemoryDocument | None, skill_docs: Sequence[MemoryDocument]) -> str:
    """The memory text for a run, or ``""`` when there is nothing to inject.

    Pass only the documents of the skills enabled for this run. Machine comments are not part of
    entry text, so nothing but the statements and the precedence note reaches the prompt.
    """
    lines: list[str] = []
    if user_doc is not None:
        lines += _section("用户偏好", user_doc)
    for doc in sorted(skill_docs, key=lambda d: d.scope):
        lines += _section(f"技能：{doc.skill}", doc)
    if not lines:
        return ""
    return "\n".join([INJECTION_HEADING, INJECTION_NOTE, "", *lines]).rstrip() + "\n"
