"""Value replacement: a follow-up that gives a new value for the attribute of a remembered entry.

"从这周开始，种子改用 2024" after "随机种子固定成 42，每次实验都要一样", "As of this quarter the
window is 30 days" after "… logged in twice in the last 14 days", "五号字，正文" after "正文一直是
宋体小四": the new statement names the attribute in other words (or barely at all), so the entry
keeps its own wording and only its value changes. That keeps whatever else the entry said
("双侧检验", "标题黑体") which a wholesale replacement would lose.

A value is typed: a number (its unit, when one follows, is part of its type: "15 个字" and "20 个字"
are both a count of characters; "0.05" and "0.01" are both decimals) or a Chinese font size
(小四, 五号). The swap needs one new value of a type and exactly one old value of that type, a word
of topic in common, and evidence that the two are about the same attribute: a change cue, the
same unit, the same named type, or a topic shared by two content features or more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import _lexicon as lx
from ._text import feature_set

__all__ = ["substituted"]

# Digits, optionally a decimal, optionally followed by what they count ("14 days", "15 个字").
_NUMBER = re.compile(
    r"(?<![\w.#-])(\d{1,9}(?:\.\d{1,6})?)(?![\d.]?\d)(?:\s{0,2}个?\s{0,2}([A-Za-z]{2,12}|[\u4e00-\u9fff]))?"
)
# Chinese font sizes: 初号 … 八号, 小初 … 小六.
_FONT_SIZE = re.compile(r"小[初一二三四五六]|[初一二三四五六七八]号")
# File formats: "CSV" and "XLSX" are two values of one attribute, the format of an output.
_FORMAT = re.compile(
    r"\b(?:csv|xlsx|xls|json|pdf|png|svg|jpe?g|parquet|docx|pptx|html|markdown)\b", re.I
)
# "…, not CSV", "而不是 PDF": a value named only to be excluded is not the entry's value.
_NEGATED = re.compile(
    r"(?:\bnot|\bno|\binstead of|\brather than|别用|不要|不用|而不是)\s{0,3}$", re.I
)
# Grammar, not topic: bigrams made only of these say nothing about what is set.
_FUNCTION_CHARS = frozenset("的了都这那样么是也就吧在和与把被给用个以内后按来要成")


@dataclass(frozen=True)
class _Value:
    text: str
    start: int
    end: int
    kind: str  # "font" | "int" | "dec"
    unit: str | None


def _values(text: str) -> list[_Value]:
    found = [_Value(m[0], m.start(), m.end(), "font", None) for m in _FONT_SIZE.finditer(text)]
    found += [
        _Value(m[0].casefold(), m.start(), m.end(), "format", None)
        for m in _FORMAT.finditer(text)
        if not _NEGATED.search(text[max(0, m.start() - 12) : m.start()])
    ]
    for m in _NUMBER.finditer(text):
        unit = m[2].casefold().removesuffix("s") if m[2] else None
        kind = "dec" if "." in m[1] else "int"
        found.append(_Value(m[1], m.start(1), m.end(1), kind, unit))
    return found


def _topic(text: str) -> set[str]:
    body = _NUMBER.sub(" ", _FONT_SIZE.sub(" ", _FORMAT.sub(" ", text)))
    for pattern in (lx.STRONG, lx.CHANGE, lx.REVISION, lx.LEND):
        body = pattern.sub(" ", body)
    return {
        f
        for f in feature_set(body)
        if not (re.search(r"[\u4e00-\u9fff]", f) and set(f) & _FUNCTION_CHARS)
    }


def substituted(new: str, sentence: str, old: str, same_skill: bool = False) -> str | None:
    """``old`` with its value replaced by the one ``new`` gives, or ``None`` when ``new`` does
    not give a new value for the attribute ``old`` holds (see the module docstring).

    ``same_skill``: both are rules of one skill, so a format said as a change needs no topic word
    in common to be about that skill's output."""
    olds, news = _values(old), _values(new)
    old_texts = {v.text for v in olds}
    fresh = [v for v in news if v.text not in old_texts]
    if len(fresh) != 1:
        return None
    value = fresh[0]
    new_texts = {v.text for v in news}
    # A bare number ("改成 3") replaces a counted one ("2 decimals") only when it names the unit.
    same_kind = [
        v
        for v in olds
        if v.kind == value.kind
        and v.text not in new_texts
        and (v.unit == value.unit or (not value.unit and (not v.unit or v.unit in new.casefold())))
    ]
    if len(same_kind) != 1:
        return None
    target = same_kind[0]
    shared = _topic(new) & _topic(old)
    cue = bool(
        lx.REVISION.search(sentence)
        or lx.CHANGE.search(sentence)
        or lx.SIZE_CHANGE.search(sentence)
    )
    if value.kind == "format" and cue and (shared or same_skill):
        # A format said as a change ("CSV again", "改成 PDF") replaces the one format the entry
        # sets: the entry is about the output's format, so the new statement replaces it whole.
        return new
    if not shared:
        return None
    typed = value.kind == "font" or (value.unit is not None and value.unit == target.unit)
    if not (cue or typed or len(shared) >= 2):
        return None
    return old[: target.start] + value.text + old[target.end :]
