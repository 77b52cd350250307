"""Secrets and personal identifiers out of memory candidates: stricter than ``errors.redact``.

``errors.redact`` masks credentials inside log text; memory must not keep a sentence *about* a
secret either ("my password is [REDACTED]" is useless and tells where a secret lives). So the unit
here is the clause: a clause that holds a secret or identifier is dropped whole, and what is left of
the sentence survives only when it stands on its own — not when it points back at the secret
("use it for …", "报销的时候用这个") or talks about it (card, password, ID, …). Whether the rest is
still worth remembering is decided again on the rest alone (see ``signals``).

Every pattern here runs over untrusted text, so each is linear-time: a match can only start where
its lookbehind says a run begins, and every repetition that is followed by something that can
fail is bounded.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from agent_core.errors import REDACTED, redact

from ._text import split_clauses

__all__ = [
    "PATTERNS",
    "ScrubResult",
    "about_a_secret",
    "find_pii",
    "luhn_valid",
    "scrub_statement",
    "scrub_text",
    "serves_a_secret",
]

_SEP = r"[ \t\u00a0\u3000.\-]"
# 11+ digits with at most two separators between digits: phones, cards, bank accounts, ID numbers.
# A match starts only at the first digit of a run (not after "digit+separator"), so each run of
# digits is scanned once.
_LONG_NUMBER = re.compile(
    rf"(?<![\w.\-])(?<!\d{_SEP})(?<!\d{_SEP}{{2}})\d(?:{_SEP}{{0,2}}\d){{10,}}"
)
_CN_ID = re.compile(r"(?<![0-9A-Za-z])\d{17}[\dXx](?![0-9A-Za-z])")
_CN_MOBILE = re.compile(r"(?<!\d)(?:\+?86[ -]?)?1[3-9]\d[ -]?\d{4}[ -]?\d{4}(?!\d)")
_INTL_PHONE = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?!\d)")
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")
_EMAIL = re.compile(r"(?<![\w.+\-])[\w.+\-]{1,64}@[\w\-]{1,63}(?:\.[\w\-]{1,63}){1,6}")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
# "password is X", "密码是X", "login: X", "the API token for the BI tool is X": the value that a
# secret-naming word introduces (within a short window, never across a sentence end).
_SECRET_PHRASE = re.compile(
    r"(?i)(?:passw(?:or)?d|passcode|\bpins?\b|pwd|secret|api[ _-]?key|access[ _-]?key|private[ _-]?key|"
    r"token|credentials?|login|log-in|username|user name|密码|口令|密钥|秘钥|令牌|用户名|登录名|登录账号)"
    r"[^。！？.!?\n]{0,30}?(?:\bis\b|\bare\b|=|:|：|是|为)\s{0,3}[^\s。，,]"
    r"|(?<![\w])key\s{0,2}[:=：]\s{0,3}\S"
    # "密码 Hz#9921wq", "password Tr0ub4dor&3": the value right after the word, with a digit in it
    r"|(?i:passw(?:or)?d|passcode|pwd|密码|口令)\s{0,3}(?=[^\s。，,]{0,30}\d)[^\s。，,]{4,40}"
)
# Identifier words followed (closely, same sentence) by a value that holds digits.
_ID_VALUE = re.compile(
    r"(?i)(?:身份证|护照|passport|社保|社会保障|\bssn\b|social security|工号|员工号|员工编号|学号|"
    r"employee (?:id|number|no)|staff (?:id|number|no)|\bid (?:number|no|card)|\bmy id\b|"
    r"卡号|银行卡|信用卡|储蓄卡|借记卡|credit card|debit card|\bcard(?: number| no)?\b|"
    r"account (?:number|no)|账号|帐号|账户|\biban\b|routing|swift|\bpins?\b|验证码|\botp\b|驾照|驾驶证|"
    r"licen[cs]e (?:number|no|plate)|车牌|会员号|membership (?:number|no)|保单号|policy (?:number|no)|"
    r"手机号?|电话|phone(?: number)?|mobile (?:number|no)|cell(?:phone)? (?:number|no)|微信号?|"
    r"wechat|\bqq\b)"
    # a value of at least four digits ("手机号只留 11 位数字" names a length, not a number)
    r"[^。！？.!?\n]{0,32}?(?<![A-Za-z0-9])[A-Za-z]{0,3}\d(?:[ \-]?\d){3,}"
)
# Personal data without digits: an address, a name of an account holder.
_ADDRESS = re.compile(
    r"(?i)\b(?:my|our)\s(?:home |office |mailing |billing |shipping |street |postal )?address\b|"
    r"(?:家庭|家里|我家|收货|通讯|邮寄|我的|我)(?:住址|地址)"
)
# A password said without its name ("连库用 ops_ro / Qw!8834zz", "the wiki login is bob,
# Hz#2024wiki"): 8 to 40 characters mixing letters, digits and a symbol people put in passwords
# (never "@", so an address is not one; a "#" colour like #1F4E79 is not one either).
_PASSWORD_CHARS = r"A-Za-z0-9!@#$%^&*+=?~"
_PASSWORD_LIKE = re.compile(
    rf"(?<![{_PASSWORD_CHARS}/\\.:_-])"
    r"(?!#[0-9A-Fa-f]{3,8}(?![A-Za-z0-9!@#$%^&*+=?~]))"
    rf"(?=[{_PASSWORD_CHARS}]{{0,39}}[!#$%^&*+=?~])(?=[{_PASSWORD_CHARS}]{{0,39}}\d)"
    rf"(?=[{_PASSWORD_CHARS}]{{0,39}}[A-Za-z])[{_PASSWORD_CHARS}]{{8,40}}"
    rf"(?![{_PASSWORD_CHARS}/\\.:_-])"
)
_TOKEN_RUN = re.compile(r"(?<![A-Za-z0-9_/+=!@#$%^&*.\-])[A-Za-z0-9_/+=!@#$%^&*.\-]{16,}")
_ID_WORDS = re.compile(r"(?i)身份证|护照|passport|社保|银行卡|信用卡|card number|\bssn\b")

# Left of a sentence once a secret went: a clause that talks about it or points back at it.
_SECRET_TOPIC = re.compile(
    r"(?i)passw|passcode|\bpins?\b|token|credential|\blogin\b|\bkey\b|\bkeys\b|secret|\bcard\b|"
    r"\bssn\b|\bid\b|passport|address|phone|account (?:number|no)|密码|口令|密钥|令牌|卡号|银行卡|"
    r"信用卡|身份证|护照|工号|账号|帐号|地址|手机|电话|号码"
)
_ANAPHORA = re.compile(
    r"(?i)\b(?:them|it|those|these|this one|that one|this number|that number)\b|"
    r"它们|它|这些|[这那]个(?![\u4e00-\u9fff])|[这那]张卡|这串|这组|该号|上面的|一下$|"
    r"\b(?:remember|note|keep|save|store|use)\s(?:that|this)(?=\s(?:for|when|in|on|to|as)\b|\s{0,3}$)|"
    # a purpose with the object left out: "…，以后填表用", "for the hotel booking"
    r"(?:要用|时用|的时候用|填表用|[^不]用)[。.!！]{0,3}$|^(?:for|to use for|use for) (?:the |my |our )?\w+"
)
# Left of a sentence once a secret went: why it should be kept, how it would save effort, or
# leave to use it ("so you can use it next time", "方便你下回自己登录", "you have my permission").
_PURPOSE = re.compile(
    r"(?i)方便|省得|免得|以便|好让|用得上|用得着|直接用|随时用|不用(?:再)?问我|就不用|不必再|帮我存|存着|存一下|"
    r"保存一下|记着|记下来|\bso (?:that )?(?:you|i)\b|\bwithout (?:asking|bothering|having)\b|"
    r"\bwhenever you\b|\bif you need\b|\byou (?:can|may) (?:use|keep|hold|log|store)\b|\bpermission\b|"
    r"\bhold on to\b|\bhang on to\b|\bon file\b|\bkeep (?:it|them|this|that)\b|\blog in as me\b"
)
_MARKER_ONLY = re.compile(
    r"(?i)^(?:请|帮我)?(?:记住|记一下|记下|记得|别忘了|remember(?: this| that)?|please remember|"
    r"don't forget|note (?:this|that)|keep (?:this|that|it) on file)[。.!！]{0,3}$"
)

# name → pattern, for the linear-time tests (tests/unit/memory/test_linear_patterns.py).
PATTERNS: dict[str, re.Pattern[str]] = {
    "long_number": _LONG_NUMBER,
    "cn_id": _CN_ID,
    "cn_mobile": _CN_MOBILE,
    "intl_phone": _INTL_PHONE,
    "ssn": _SSN,
    "email": _EMAIL,
    "ipv4": _IPV4,
    "secret_phrase": _SECRET_PHRASE,
    "id_value": _ID_VALUE,
    "address": _ADDRESS,
    "token_run": _TOKEN_RUN,
    "password_like": _PASSWORD_LIKE,
    "id_words": _ID_WORDS,
    "secret_topic": _SECRET_TOPIC,
    "anaphora": _ANAPHORA,
    "marker_only": _MARKER_ONLY,
    "purpose": _PURPOSE,
}


def luhn_valid(digits: str) -> bool:
    """True when the digit string passes the Luhn checksum used by payment cards."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _kind_of_char(ch: str) -> int:
    return 0 if ch.isdigit() else 1 if ch.isupper() else 2 if ch.islower() else 3


def _opaque(token: str) -> bool:
    """A machine-made key: letters and digits (or cases) that keep alternating, like random text."""
    kinds = [_kind_of_char(c) for c in token if c.isascii() and c.isalnum()]
    switches = sum(1 for a, b in zip(kinds, kinds[1:], strict=False) if a != b)
    digits = kinds.count(0)
    return len(kinds) >= 14 and switches >= 6 and (digits >= 2 or switches >= 10)


def _opaque_tokens(text: str) -> list[str]:
    return [m.group(0) for m in _TOKEN_RUN.finditer(text) if _opaque(m.group(0))]


_DIGIT = re.compile(r"\d")
_SECRET_WORD = re.compile(
    r"(?i)pass|pin|pwd|secret|key|token|credential|log-?in|user|密码|口令|密钥|秘钥|令牌|用户名|登录"
)


def _checks(text: str) -> list[tuple[re.Pattern[str], str]]:
    """The patterns that can match ``text`` at all: cheap tests spare the rest (a long message
    without a digit never runs the number patterns)."""
    checks: list[tuple[re.Pattern[str], str]] = []
    if _SECRET_WORD.search(text):
        checks.append((_SECRET_PHRASE, "secret"))
    if _DIGIT.search(text):
        checks += [(_CN_ID, "id_number"), (_SSN, "id_number"), (_ID_VALUE, "id_number"),
                   (_CN_MOBILE, "phone"), (_INTL_PHONE, "phone"), (_IPV4, "ip_address")]  # fmt: skip
    if _DIGIT.search(text) and _PASSWORD_SYMBOL.search(text):
        checks.append((_PASSWORD_LIKE, "secret"))
    if "@" in text:
        checks.append((_EMAIL, "email"))
    if _ADDRESS_WORD.search(text):
        checks.append((_ADDRESS, "address"))
    return checks


_ADDRESS_WORD = re.compile(r"(?i)address|地址|住址")
_PASSWORD_SYMBOL = re.compile(r"[!#$%^&*+=?~]")


def find_pii(text: str) -> list[str]:
    """Kinds of secrets and identifiers present in ``text`` (empty when clean)."""
    text = unicodedata.normalize("NFKC", text)
    kinds: list[str] = []
    if redact(text) != text or REDACTED in text:
        kinds.append("credential")
    kinds.extend(kind for pattern, kind in _checks(text) if pattern.search(text))
    for m in _LONG_NUMBER.finditer(text) if _DIGIT.search(text) else ():
        digits = "".join(c for c in m.group(0) if c.isdigit())
        kinds.append("card" if 13 <= len(digits) <= 19 and luhn_valid(digits) else "long_number")
    if _opaque_tokens(text):
        kinds.append("opaque_token")
    return sorted(set(kinds))


@dataclass(frozen=True)
class ScrubResult:
    """A scrubbed statement: ``text`` is ``None`` when nothing worth keeping is left."""

    text: str | None
    removed: list[str] = field(default_factory=list)


_CONJUNCTION = re.compile(
    r"(?i)(?:^|(?<=\S)\s{1,8})(?:and|also|but)\s{1,8}|并且|然后|同时|另外|还有"
)


_LEADING_CONJUNCTION = re.compile(r"(?i)^(?:and|also|but|并且|然后|同时|另外)\s{0,3}")


def _sub_parts(clause: str) -> list[str]:
    # A clause may join a secret and a preference with a conjunction: split only there.
    return [p.strip() for p in _CONJUNCTION.split(clause) if p and p.strip()]


def about_a_secret(part: str) -> bool:
    """Whether ``part`` points back at, or talks about, a secret ("use it", "the card is …")."""
    return bool(
        _ANAPHORA.search(part) or _SECRET_TOPIC.search(part) or _MARKER_ONLY.match(part.strip())
    )


def serves_a_secret(part: str) -> bool:
    """Whether ``part`` only serves a secret said beside it: points back at it, talks about it,
    or gives a purpose, convenience or permission for keeping it."""
    return about_a_secret(part) or bool(_PURPOSE.search(part))


def scrub_statement(sentence: str) -> ScrubResult:
    """Drop every clause (or conjunct) that holds a secret or identifier; keep the rest.

    When something was dropped, the surviving parts that point back at it or talk about it
    ("remember them", "帮我记一下", "the card is for travel") are dropped too, so a secret-only
    request yields ``text=None``.
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
            elif not about_a_secret(part) and not _PURPOSE.search(part):
                # A purpose, convenience or permission clause is about the secret that went.
                kept.append(_LEADING_CONJUNCTION.sub("", part))
    joiner = "，" if re.search(r"[\u4e00-\u9fff]", sentence) else ", "
    text = joiner.join(kept).strip() or None
    return ScrubResult(text, sorted(set(removed)))


def scrub_text(text: str) -> str:
    """Mask secrets and identifiers in free text (tool errors, argument values) in place."""
    text = redact(unicodedata.normalize("NFKC", text))
    for pattern in (
        _SECRET_PHRASE,
        _CN_ID,
        _LONG_NUMBER,
        _SSN,
        _ID_VALUE,
        _CN_MOBILE,
        _INTL_PHONE,
        _EMAIL,
        _IPV4,
    ):
        text = pattern.sub(REDACTED, text)
    for token in set(_opaque_tokens(text)):
        text = text.replace(token, REDACTED)
    return text
