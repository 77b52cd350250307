"""What a request to forget names, and what it says holds instead.

"Forget what I told you about the fiscal year - we've moved to the calendar year", "忘掉星号那条吧",
"离职率的算法先从记忆里去掉吧": the topic is what is left once the back-reference words ("what I
told you about", "the … thing", "那条") go, and it may come before the marker ("X 从记忆里去掉").
A clause after the request that says what holds now ("we've moved to …", "finance wants …",
"改用 …") is a memory of its own; a reason ("现在样本量都够了") is not.
"""

from __future__ import annotations

import re

from . import _lexicon as lx
from ._text import feature_set, split_clauses

__all__ = ["FORGET_MATCH", "asks_to_forget", "forget_topic", "forgets", "replacement_clauses"]

# Share of the topic's content features an entry must hold to be the one forgotten.
FORGET_MATCH = 0.6

_LEAD = re.compile(
    r"^(?:(?:all |everything )?(?:what|that) (?:i|we) (?:told you|said|mentioned|asked)"
    r"(?: (?:before|earlier|last time))?(?: about)?|everything about|all about|the (?:rule|thing|"
    r"bit|part|note|one|stuff) about|about|the|my|our)\s{1,3}|"
    r"^(?:我|我们)?(?:之前|上次|前面|刚才)?(?:说的|说过的|讲的|定的|交代的)?(?:那个|那条|这条|关于)",
    re.I,
)
_TAIL = re.compile(
    r"\s{0,3}(?:thing|rule|bit|part|note|one|stuff|setting|preference)s?\s{0,3}$|"
    r"(?:的)?(?:那条|这条|那个|这个|规则|要求|设置|口径|算法)?(?:吧|了|啦)?\s{0,3}$",
    re.I,
)
# The marker after its topic: "X 先从记忆里去掉吧", "drop X from memory".
_AFTER = re.compile(
    r"(?:先|就)?(?:从|在)(?:你的)?记忆(?:里|中)?(?:先)?(?:去掉|删掉|删除|拿掉|移除|清掉)|"
    r"\bfrom (?:your |the )?memory\b",
    re.I,
)
_VERB = re.compile(r"^(?:please\s{1,3})?(?:remove|drop|delete|erase|clear|take)\s{1,3}|^把", re.I)
# A clause that says what holds now, after a request to forget the old rule.
_INSTEAD = re.compile(
    r"\b(?:moved|switched|changed|gone|went) (?:\w{1,12} ){0,2}to\b|\bwants?\b|\b(?:use|using)\b|\binstead\b|"
    r"\bnow (?:use|uses|is|are|want)\b|改成|改用|换成|改为|换到|现在(?:用|按|是|要)|以\S{1,12}为准",
    re.I,
)
_FUNCTION_CHARS = frozenset("的了都这那样么是也就吧在和与把被给条个先")


def asks_to_forget(text: str) -> bool:
    """A request to drop a memory, with the marker before or after its topic."""
    after = _AFTER.search(text)
    return bool(lx.FORGET.search(text) or (after and feature_set(text[: after.start()])))


def forget_topic(text: str) -> str:
    """The topic of a request to forget (see the module docstring)."""
    after = _AFTER.search(text)
    if after and feature_set(text[: after.start()]):
        body = _VERB.sub("", text[: after.start()].strip())
    else:
        match = lx.FORGET.search(text)
        rest = text[match.end() :] if match else text
        clauses = split_clauses(rest)
        body = clauses[0] if clauses else rest
    body = body.strip(" ，,:：-—")
    body = _LEAD.sub("", body, count=1)
    return _TAIL.sub("", body, count=1).strip() or body.strip()


def _content(text: str) -> frozenset[str]:
    return frozenset(
        f
        for f in feature_set(text)
        if not (re.search(r"[\u4e00-\u9fff]", f) and set(f) & _FUNCTION_CHARS)
    )


def forgets(topic: str, entry: str) -> bool:
    """True when ``entry`` is what a request to forget ``topic`` names."""
    wanted = _content(topic) or feature_set(topic)
    if not wanted:
        return False
    return len(wanted & feature_set(entry)) / len(wanted) >= FORGET_MATCH


def replacement_clauses(text: str) -> list[str]:
    """The clauses after the request to forget that say what holds instead."""
    clauses = split_clauses(text)
    start = next((i for i, c in enumerate(clauses) if lx.FORGET.search(c) or _AFTER.search(c)), 0)
    return [
        c.strip(" 。.")
        for c in clauses[start + 1 :]
        if _INSTEAD.search(c) and len(feature_set(c)) >= 2 and not lx.QUESTION.search(c)
    ]
