"""How much a short sentence adds to what its neighbours said, and general approvals.

A sentence that only makes its neighbour durable ("Every time.", "以后都照这个来") or approves
what the agent just did ("do it like that every time", "以后发页面都这样放") adds nothing of its
own: words it shares with the complaint and the agent's reply before it (what it approves) are
not new, and a condition it sets ("whenever there are lots of categories", "类别多的时候") is
kept with the rule rather than counted against the approval.
"""

from __future__ import annotations

import re

from . import _lexicon as lx
from ._text import feature_set

__all__ = ["AFFIRM", "approval_condition", "approves", "new_content"]

# Agreement that carries nothing of its own ("对，就是这个意思", "Much better", "Perfect").
AFFIRM = re.compile(
    r"就是这个意思|没错|这回对了|^(?:对|好|行|嗯|可以)(?=[，,。！!\s]|$)|\b(?:yes|yeah|right|great|nice|"
    r"perfect|good|ok(?:ay)?|much better|that'?s it|exactly)\b",
    re.I,
)
_FUNCTION_CHARS = frozenset("都这个那样么了吧的就也要再是来照按把着过呀啊嘛呢哦一直")
_WORD = re.compile(r"[a-z][a-z0-9'-]*")


def new_content(text: str, neighbour: str) -> int:
    """Content of ``text`` that ``neighbour`` does not already hold: new words (English) or new
    characters (Chinese), marker words and function words left out."""
    rest = lx.IDIOMS.sub(" ", text)
    for pattern in (lx.STRONG, lx.LEND, lx.WEAK, lx.CORRECTION, lx.REPEAT, lx.APPROVAL, AFFIRM):
        rest = pattern.sub(" ", rest)
    rest = rest.casefold()
    seen = neighbour.casefold()
    seen_words = {_stem_word(w) for w in _WORD.findall(seen)}
    words = [
        w
        for w in _WORD.findall(rest)
        if _stem_word(w) not in seen_words and not feature_set(w) <= frozenset()
    ]
    words += [n for n in re.findall(r"\d+(?:\.\d+)?", rest) if n not in seen]
    chars = [c for c in re.findall(r"[\u4e00-\u9fff]", rest) if c not in _FUNCTION_CHARS]
    return len(words) + len([c for c in chars if c not in seen]) // 2


def _stem_word(word: str) -> str:
    return next(iter(feature_set(word)), word)


# "every PR should look like that", "每页都这样放": a quantifier over future outputs.
_EVERY = re.compile(r"\b(?:every|each|all|any) \w{2,20}\b|每(?:个|份|次|页|张|篇|期|条)", re.I)
# "whenever there are lots of categories", "类别多的时候": when the approved change applies.
_CONDITION = re.compile(
    r"\b(?:whenever|when|if) (?!you\b)[^.;!?]{3,80}|[^，,。；;！!]{2,30}?(?:的时候|时)(?=[，,]|$)",
    re.I,
)


def approval_condition(sentence: str) -> str | None:
    """The condition an approval sets on the approved change, if any."""
    match = _CONDITION.search(sentence.strip(" 。.!！"))
    return match[0].strip(" ，,") if match else None


def approves(sentence: str, context: str = "") -> bool:
    """A general approval of what the agent just did ("do it like that every time", "以后都照这个
    格式出", "make that the default"): a reference back, a durability cue, and nothing new but
    what ``context`` (the complaint and the reply it approves) already said, or a condition."""
    if len(sentence) > 100 or lx.QUESTION.search(sentence) or not lx.APPROVAL.search(sentence):
        return False
    if not (lx.STRONG.search(sentence) or lx.LEND.search(sentence) or _EVERY.search(sentence)):
        return False
    rest = _EVERY.sub(" ", _CONDITION.sub(" ", sentence))
    return new_content(rest, context) <= 2
