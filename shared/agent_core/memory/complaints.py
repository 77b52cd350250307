"""A repeated failure reported, then the rule that should hold: "怎么又把调试语句留在代码里了？提交前
要清干净。", "Still wrong, the legend is on the bars again. Legends go below the plot."

The report may be a rhetorical question ("怎么又…？", "why is … again?"); the rule after it may be
said without a marker word, as a placement or a modal ("页码放在页脚右下角", "提交前要清干净",
"Legends go below the plot"); and when the rule does not name what it is about, the report does.
"""

from __future__ import annotations

import re

from . import _lexicon as lx
from ._text import detect_language, feature_set, split_clauses

__all__ = ["complaint_core", "directive", "rhetorical_repeat", "with_subject"]

# A rule said without a marker word: a modal, a placement or an English imperative.
_DIRECTIVE = re.compile(
    r"(?:需要|应该|应当|必须|得要|一定要|要)(?=[\u4e00-\u9fff])|放在|放到|写在|写到|标在|统一|一律|"
    r"\b(?:should|must|needs? to|has to|have to|goes?|belongs?|stays?)\b",
    re.I,
)
_SELF = re.compile(r"^(?:我|咱)|^(?:i|i'm|i am|i'll|i have|i've)\b", re.I)
_LEAD = re.compile(r"^(?:你|您)?(?:怎么|为什么|为啥)?|^(?:why (?:do|did|does|is|are) )", re.I)
_FUNCTION_CHARS = frozenset("的了都这那样么是也就吧在和与把被给又还要前后")


def rhetorical_repeat(sentence: str) -> bool:
    """A question that reports a repeated failure ("怎么又…？", "Why is the total wrong again?")."""
    return bool(
        lx.QUESTION.search(sentence)
        and lx.REPEAT.search(sentence)
        and len(feature_set(sentence)) >= 3
    )


def directive(sentence: str) -> bool:
    """A sentence that says how things should be, with or without a marker word."""
    if lx.QUESTION.search(sentence) or lx.REPEAT.search(sentence) or lx.CORRECTION.search(sentence):
        return False
    if _SELF.match(sentence.strip()):
        return False  # "我下午要开会": the user's own plans, not how the output should be
    clauses = split_clauses(sentence)
    return bool(_DIRECTIVE.search(sentence) or any(lx.IMPERATIVE.match(c) for c in clauses))


def complaint_core(complaint: str) -> str:
    """What a complaint is about, without its repeat and correction words and the clauses that
    point at the one output it was seen in ("上个月那份留存表")."""
    text = complaint
    for pattern in (lx.REPEAT, lx.CORRECTION):
        text = pattern.sub(" ", text)
    clauses = [_LEAD.sub("", c.strip()).strip(" ？?！!。.") for c in split_clauses(text)]
    return (
        (" " if detect_language(complaint) == "en" else "，")
        .join(c for c in clauses if len(feature_set(c)) >= 2 and not lx.ONE_OFF.search(c))
        .strip()
    )


def _content(text: str) -> frozenset[str]:
    return frozenset(
        f
        for f in feature_set(text)
        if not (re.search(r"[\u4e00-\u9fff]", f) and set(f) & _FUNCTION_CHARS)
    )


def with_subject(rule: str, complaint: str) -> str:
    """``rule``, preceded by what the complaint was about when the rule does not name it."""
    if _content(rule) & _content(complaint):
        return rule
    core = complaint_core(complaint)
    if not core:
        return rule
    joiner = "：" if detect_language(rule) == "zh" else ": "
    return f"{core}{joiner}{rule}"
