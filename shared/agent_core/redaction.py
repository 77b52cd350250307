"""Redaction: API keys, bearer tokens, passwords and URL credentials taken out of text.

Every error payload, log line and stored failure passes through :func:`redact` or
:func:`redact_obj` (``agent_core.errors`` and ``agent_core.observability.logs`` apply them). A
module of its own, on the standard library only: a process that only logs (the search index's
child) needs redaction without the error payloads' pydantic models.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["REDACTED", "redact", "redact_obj"]

REDACTED = "[REDACTED]"

# The words that make a key name a secret, in the last pattern below and its needle.
_KEY_WORDS: Final = (
    r"api[_\-]?key|apikey|passw(?:or)?d|pwd|secret|token(?!s|_count)|access[_\-]?key|"
    r"private[_\-]?key|auth"
)

# Order matters: URL credentials first, so the password inside a URL is caught as a whole.
# Every pattern is linear-time over any input (it runs over user text and tool output): a match
# starts only where a run begins, and repetitions before something that can fail are bounded.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # scheme://user:password@host → scheme://[REDACTED]@host
    (
        re.compile(
            r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]{0,30}://)[^\s/@:]{0,256}(?::[^\s/@]{0,256})?@"
        ),
        r"\1" + REDACTED + "@",
    ),
    # Authorization headers and bearer tokens.
    (re.compile(r"(?i)\b(bearer|basic)\s{1,8}[A-Za-z0-9._~+/=\-]{8,}"), r"\1 " + REDACTED),
    # Well-known API key shapes: OpenAI, Anthropic, GitHub, Slack, AWS, Google, soong-agent's own.
    (re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{12,}"), REDACTED),
    (re.compile(r"\bsa_(?:live|dev)_[A-Za-z0-9_\-]{12,}"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"), REDACTED),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), REDACTED),
    # key=value / key: value pairs whose key names a secret (api_key, password, token, secret, …).
    # A key is a whole run of its characters (at most 40 + 11 + 40) just before the separator; the
    # lookahead finds such a run first, possessively (it never backtracks), so at the start of
    # every other word the pattern fails at once instead of trying each word of the key in turn.
    (
        re.compile(
            r"(?i)(?<![A-Za-z0-9_\-])(?=[A-Za-z0-9_\-]{1,91}+\"?\s{0,8}[:=])"
            rf"([A-Za-z0-9_\-]{{0,40}}?(?:{_KEY_WORDS})[A-Za-z0-9_\-]{{0,40}})"
            r"(\"?\s{0,8}[:=]\s{0,8}\"?)([^\s\"',;&]+)"
        ),
        r"\1\2" + REDACTED,
    ),
)

_SECRET_KEY = re.compile(
    r"(?i)(api[_\-]?key|apikey|passw(or)?d|pwd|secret|token(?!s|_count)|authorization|access[_\-]?key|"
    r"private[_\-]?key|credential|cookie)"
)


# The last pattern's second needle: a secret-naming word, the rest of its key and the separator
# (what that pattern cannot match without). A plain substring ("token") would send every log line
# that counts tokens (input_tokens=…) through the last pattern, and the word alone every text that
# mentions an author; the pattern costs ~40 µs a KiB of text, this scan a few.
_SECRET_PAIR: Final = re.compile(rf"(?:{_KEY_WORDS})[a-z0-9_\-]{{0,40}}+\"?\s{{0,8}}[:=]")
# For ASCII text, what each pattern above cannot match without (in the same order), looked up in
# the lowercased text: groups that must all hold, each a few strings of which one must occur, or
# a pattern that must match — a cheap test that lets most texts skip most patterns. Non-ASCII text
# runs every pattern: case-insensitive matching of non-ASCII letters is not plain lowercasing.
_Group = tuple[str, ...] | re.Pattern[str]
_NEEDLES: Final[tuple[tuple[_Group, ...], ...]] = (
    (("://",), ("@",)),
    (("bearer", "basic"),),
    (("sk-",),),
    (("sa_",),),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),),
    (("xox",),),
    (("akia",),),
    (("aiza",),),
    ((":", "="), _SECRET_PAIR),
)
# A text holding no pattern's first needle can match none: most texts (ids, names, figures)
# leave at this one scan.
_ANY_NEEDLE: Final = re.compile(
    "|".join(re.escape(n) for groups in _NEEDLES if isinstance(groups[0], tuple) for n in groups[0])
)


def _may_match(lowered: str, groups: tuple[_Group, ...]) -> bool:
    # Plain loops: redact runs on every log line, and generators inside all()/any() cost more
    # than the needles' own tests.
    for group in groups:
        if isinstance(group, tuple):
            for needle in group:
                if needle in lowered:
                    break
            else:
                return False
        elif group.search(lowered) is None:
            return False
    return True


def redact(text: str) -> str:
    """Return ``text`` with API keys, bearer tokens, passwords and URL credentials replaced.

    The function is total and idempotent: ``redact(redact(s)) == redact(s)``.
    """
    ascii_only = text.isascii()
    lowered = text.lower() if ascii_only else ""
    if ascii_only and _ANY_NEEDLE.search(lowered) is None:
        return text
    for (pattern, replacement), needles in zip(_PATTERNS, _NEEDLES, strict=True):
        if ascii_only and not _may_match(lowered, needles):
            continue
        replaced = pattern.sub(replacement, text)
        if replaced != text:
            text = replaced
            lowered = text.lower()  # "[REDACTED]" is ASCII: still ascii_only
    return text


def redact_obj(obj: Any) -> Any:
    """Redact strings anywhere inside JSON-like data; values under secret-named keys are dropped."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, Mapping):
        return {
            k: (REDACTED if isinstance(k, str) and _SECRET_KEY.search(k) else redact_obj(v))
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    return obj
