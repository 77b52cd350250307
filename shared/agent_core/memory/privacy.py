"""Secrets and personal identifiers out of memory candidates: stricter than ``errors.redact``.

``errors.redact`` masks credentials inside log text; memory must not keep a sentence *about* a
secret either ("my password is [REDACTED]" is useless and tells where a secret lives). So the unit
here is the clause: a clause that holds a secret or identifier is dropped whole, the rest of the
sentence survives, and a sentence left without an instruction of its own yields nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agent_core.errors import REDACTED, redact

from ._text import split_clauses

__all__ = ["ScrubResult", "find_pii", "luhn_valid", "scrub_statement", "scrub_text"]

_CN_ID = re.compile(r"(?<![0-9A-Za-z])\d{17}[\dXx](?![0-9A-Za-z])|(?<!\d)\d{15}(?!\d)")
_CARD = re.compile(r"(?<![\d])(?:\d[ -]?){12,18}\d(?![\d])")
_CN_MOBILE = re.compile(r"(?<!\d)(?:\+?86[ -]?)?1[3-9]\d[ -]?\d{4}[ -]?\d{4}(?!\d)")
_INTL_PHONE = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?!\d)")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
# "password is X", "密码是X", "key: X", "口令为X" — the value after a secret-naming word.
_SECRET_PHRASE = re.compile(
    r"(?i)(?:passw(?:or)?d|passcode|pwd|secret|api[ _-]?key|token|密码|口令|密钥|秘钥|令牌|key)"
    r"\s*(?:is|are|=|:|：|是|为)\s*\S+"
)
# Long opaque tokens with mixed case and digits are keys even when nothing names them.
_OPAQUE = re.compile(r"(?<![\w/])(?=[\w/+=!@#$%^&*.-]{20,})(?=\S*\d)(?=\S*[a-z])(?=\S*[A-Z])\S+")
_ID_WORDS = re.compile(r"(?i)身份证|护照|passport|社保|银行卡|信用卡|card number|\bssn\b")
_ANAPHORA = re.compile(r"(?i)\b(?:them|it|those|these)\b|它们|它|这些|一下$")
_MARKER_ONLY = re.compile(
    r"(?i)^(?:请|帮我)?(?:记住|记一下|记下|记得|别忘了|remember(?: this| that)?|please remember|"
    r"don't forget|note (?:this|that))[。.!！]*$"
)


def luhn_valid(digits: str) -> bool:
    """True when the digit string passes the Luhn checksum used by payment cards."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _cards(text: str) -> list[str]:
    found = []
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group(0))
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            found.append("card")
    return found


def find_pii(text: str) -> list[str]:
    """Kinds of secrets and identifiers present in ``text`` (empty when clean)."""
    kinds: list[str] = []
    if redact(text) != text or REDACTED in text:
        kinds.append("credential")
    checks = (
        (_SECRET_PHRASE, "secret"),
        (_OPAQUE, "opaque_token"),
        (_CN_ID, "id_number"),
        (_CN_MOBILE, "phone"),
        (_INTL_PHONE, "phone"),
        (_EMAIL, "email"),
        (_IPV4, "ip_address"),
    )
    kinds.extend(kind for pattern, kind in checks if pattern.search(text))
    kinds.extend(_cards(text))
    if _ID_WORDS.search(text) and re.search(r"\d{6,}", text):
        kinds.append("id_number")
    return sorted(set(kinds))


@dataclass(frozen=True)
class ScrubResult:
    """A scrubbed statement: ``text`` is ``None`` when nothing worth keeping is left."""

    text: str | None
    removed: list[str] = field(default_factory=list)


def _sub_parts(clause: str) -> list[str]:
    # A clause may join a secret and a preference with a conjunction: split only there.
    return [p.strip() for p in re.split(r"(?i)\s+and\s+|\s+also\s+|并且|然后|同时", clause) if p]


def scrub_statement(sentence: str) -> ScrubResult:
    """Drop every clause (or conjunct) that holds a secret or identifier; keep the rest.

    When something was dropped, surviving parts that only point back at it ("remember them",
    "帮我记一下") are dropped too, so a secret-only request yields ``text=None``.
    """
    if not find_pii(sentence):
        return ScrubResult(sentence)
    kept: list[str] = []
    removed: list[str] = []
    for clause in split_clauses(sentence):
        for part in _sub_parts(clause) if find_pii(clause) else [clause]:
            kinds = find_pii(part)
            if kinds:
                removed.extend(kinds)
            elif not (_ANAPHORA.search(part) or _MARKER_ONLY.match(part.strip())):
                kept.append(part)
    joiner = "，" if re.search(r"[\u4e00-\u9fff]", sentence) else ", "
    text = joiner.join(kept).strip() or None
    return ScrubResult(text, sorted(set(removed)))


def scrub_text(text: str) -> str:
    """Mask secrets and identifiers in free text (tool errors, argument values) in place."""
    text = redact(text)
    for pattern in (_SECRET_PHRASE, _OPAQUE, _CN_ID, _CN_MOBILE, _INTL_PHONE, _EMAIL, _IPV4):
        text = pattern.sub(REDACTED, text)

    def card(m: re.Match[str]) -> str:
        digits = re.sub(r"\D", "", m.group(0))
        return REDACTED if 13 <= len(digits) <= 19 and luhn_valid(digits) else m.group(0)

    return _CARD.sub(card, text)
