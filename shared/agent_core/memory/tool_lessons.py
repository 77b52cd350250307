"""Tool experience: a failed call followed by a *changed* call that then worked is a lesson.

Not lessons: an identical retry that succeeded (transient), a fix after the user spoke in between
(they supplied another file or value), a change of output/input path only, a chain that never
succeeded. The lesson is the error plus the argument delta, scrubbed of secrets and truncated so
data rows from tool payloads never reach memory.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._text import Language
from .candidate import Signal, SignalKind
from .interaction import Interaction, Turn, TurnRole
from .privacy import scrub_text
from .scope import DEFAULT_SKILL_KEYWORDS, USER_SCOPE, skill_of, skill_scope, tool_scope

__all__ = ["argument_delta", "detect_tool_lessons", "json_cause"]

_PATH_KEYS = re.compile(
    r"(?i)^(?:path|file|filename|file_path|output|output_path|dir|directory|dest)$"
)
_MAX_VALUE = 60
_MAX_ERROR = 160
_MAX_DIFFED = 2_000  # characters of one argument compared token by token (difflib is quadratic)


def _short(value: Any, limit: int = _MAX_VALUE) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text[:_MAX_DIFFED]
    text = scrub_text(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _token_delta(old: str, new: str, zh: bool) -> str:
    """Only the changed tokens of two long strings (SQL, formulas): removed and added runs."""
    a = re.findall(r"\w+|\S", old[:_MAX_DIFFED])
    b = re.findall(r"\w+|\S", new[:_MAX_DIFFED])
    parts = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        gone, added = " ".join(a[i1:i2]), " ".join(b[j1:j2])
        if op == "delete":
            parts.append(f"删除「{_short(gone)}」" if zh else f'drop "{_short(gone)}"')
        elif op == "insert":
            parts.append(f"新增「{_short(added)}」" if zh else f'add "{_short(added)}"')
        elif op == "replace":
            parts.append(
                f"「{_short(gone)}」→「{_short(added)}」"
                if zh
                else f'"{_short(gone)}" → "{_short(added)}"'
            )
    return "，".join(parts) if zh else ", ".join(parts)


def argument_delta(
    old: Mapping[str, Any], new: Mapping[str, Any], language: Language
) -> dict[str, str]:
    """Per changed argument, a short description of the change (empty when nothing changed)."""
    zh = language == "zh"
    delta: dict[str, str] = {}
    for key in list(old) + [k for k in new if k not in old]:
        if key not in new:
            delta[key] = "去掉" if zh else "removed"
        elif key not in old:
            delta[key] = f"新增 {_short(new[key])}" if zh else f"added {_short(new[key])}"
        elif old[key] != new[key]:
            o, n = old[key], new[key]
            if isinstance(o, str) and isinstance(n, str) and max(len(o), len(n)) > 40:
                delta[key] = _token_delta(o, n, zh)
            else:
                delta[key] = f"{_short(o)} → {_short(n)}"
    return delta


_FILE_LIKE = re.compile(r"(?:^|/)[\w.-]{1,120}\.[A-Za-z0-9]{1,8}$")
# "… at line 1 column 66", "(line 1 column 2)", "at position 12": where, not why.
_WHERE = re.compile(
    r"\s{0,3}\(?\b(?:at\s)?(?:line\s\d{1,9}\s?,?\s?column\s\d{1,9}|position\s\d{1,9}|char\s\d{1,9})\)?",
    re.I,
)
_JSON_PREFIX = re.compile(r"(?i)^[^:]{0,60}\bjson\b[^:]{0,60}:\s{0,3}")


def json_cause(error: str) -> str:
    """What an invalid-JSON error says went wrong ("trailing comma before ']'", "unescaped newline
    (control character U+000A) inside a string"), without where it happened; '' when it says
    nothing more than "invalid JSON"."""
    rest = _JSON_PREFIX.sub("", error.strip(), count=1)
    if rest == error.strip():
        return ""  # no "…JSON…:" before a cause
    cause = " ".join(_WHERE.sub("", rest).split()).strip(" ;:,.")
    return _short(cause, 100) if len(cause) >= 4 else ""


def _paths(old: Any, new: Any) -> bool:
    """Both values are file paths: changing one is where output goes, not how the tool works."""
    return all(isinstance(v, str) and _FILE_LIKE.search(v.strip()) for v in (old, new))


def _lesson(failed: Turn, fixed: Turn, language: Language) -> str | None:
    zh = language == "zh"
    first = failed.content[:_MAX_DIFFED].strip()
    error = _short(first.splitlines()[0] if first else "", _MAX_ERROR)
    name = failed.tool_name or "tool"
    if isinstance(failed.arguments, str) and isinstance(fixed.arguments, dict):
        cause = json_cause(first.splitlines()[0] if first else "")
        if zh:
            fix = f"参数改为合法 JSON（{cause}）" if cause else "参数改为合法 JSON"
        else:
            fix = f"send valid JSON ({cause})" if cause else "send the arguments as valid JSON"
    elif isinstance(failed.arguments, dict) and isinstance(fixed.arguments, dict):
        delta = argument_delta(failed.arguments, fixed.arguments, language)
        if not delta or all(
            _PATH_KEYS.match(k) or _paths(failed.arguments.get(k), fixed.arguments.get(k))
            for k in delta
        ):
            return None
        fix = ("；" if zh else "; ").join(f"{k}: {v}" for k, v in delta.items())
    else:
        return None
    if zh:
        return f"{name} 报错「{error}」时的做法：{fix}"
    return f'{name}: when it fails with "{error}", fix: {fix}'


def _segments(turns: Sequence[Turn]) -> list[list[Turn]]:
    """Tool turns between user turns: a fix that follows a user turn came from the user."""
    segments: list[list[Turn]] = [[]]
    for turn in turns:
        if turn.role is TurnRole.USER:
            segments.append([])
        elif turn.role is TurnRole.TOOL and turn.tool_name:
            segments[-1].append(turn)
    return segments


def detect_tool_lessons(
    interaction: Interaction,
    language: Language,
    *,
    keywords: Mapping[str, Sequence[str]] = DEFAULT_SKILL_KEYWORDS,
) -> list[Signal]:
    """Lessons of one interaction: for each failed call, the change made by the next call of the
    same tool, when that chain of calls ends in success and the change was not a path only."""
    lessons: list[Signal] = []
    for segment in _segments(interaction.turns):
        for i, failed in enumerate(segment):
            if not failed.is_error:
                continue
            chain = [t for t in segment[i + 1 :] if t.tool_name == failed.tool_name]
            if not chain or not any(not t.is_error for t in chain):
                continue
            nxt = chain[0]
            if nxt.arguments == failed.arguments or (
                nxt.is_error and nxt.content == failed.content
            ):
                continue
            text = _lesson(failed, nxt, language)
            if text is None:
                continue
            scope = tool_scope(
                failed.tool_name or "",
                interaction.skills,
                keywords,
                interaction.descriptions(),
                owners=interaction.tool_owners(),
            )
            if scope == USER_SCOPE:
                scope = _scope_from_request(failed.tool_name or "", interaction, keywords)
            lessons.append(
                Signal(
                    kind=SignalKind.TOOL_LESSON,
                    scope=scope,
                    text=text,
                    sentence=text,
                    language=language,
                )
            )
    return lessons


def _scope_from_request(
    tool_name: str, interaction: Interaction, keywords: Mapping[str, Sequence[str]]
) -> str:
    """The skill of a tool that no skill owns or names: the one its name's words describe
    ("deck_export" with "Builds slide decks …"), else the one the user's request of the same
    interaction is about ("画一下提及率饼图" with "生成统计图表（柱状图、饼图…）")."""
    descriptions = interaction.descriptions()
    for text in (re.sub(r"[_\-.]+", " ", tool_name), interaction.user_text()):
        found = skill_of(text, interaction.skills, keywords=keywords, descriptions=descriptions)
        if found is not None:
            return skill_scope(found)
    return USER_SCOPE
