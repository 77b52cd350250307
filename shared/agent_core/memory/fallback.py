"""Rule-based consolidation: what applies when the LLM fails, times out or answers badly.

Per signal, against the documents as they stand after the previous signals:

1. a ``forget`` deletes the entries that contain its topic;
2. the same statement (normalized, marker words removed) already present → ``none``;
3. a slot already held in the scope: same value → ``none``, other value → ``update`` in place
   (instruction clauses of the old entry that set no slot are carried over, so a sibling rule
   survives the change);
4. a statement contained in an existing entry → ``none``; otherwise ``add``.

``statement`` signals (no marker) are never written: unknown statements need an explicit marker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from . import _lexicon as lx
from ._text import containment, feature_set, normalize, split_clauses
from .candidate import Signal, SignalKind
from .document import MemoryDocument, MemoryEntry, new_document
from .forgetting import forgets
from .scope import CROSS_CUTTING_SLOTS, USER_SCOPE
from .slots import detect_slots, mentions_value, slot_template
from .updates import MemoryUpdate, MemoryUpdateBatch, UpdateOp, apply_updates
from .values import substituted

__all__ = [
    "NEAR_DUPLICATE",
    "consolidate_fallback",
    "core_text",
    "revised_entry",
    "strip_markers",
    "without_old_value",
]

NEAR_DUPLICATE = 0.8
REPEATED = 0.5
_INSTRUCTION = re.compile(
    r"保留|使用|放在|不要|别|统一|按|显示|导出|命名|\b(?:keep|use|put|show|never|always|don'?t|name|add)\b",
    re.I,
)
_FILLER = re.compile(r"(?i)^(?:请|麻烦|再确认一下|actually|also|please)[，,:：\s]*")


def core_text(text: str) -> str:
    """The dedup key of a statement: marker words and filler removed, then normalized."""
    for pattern in (lx.STRONG, lx.CORRECTION, lx.CHANGE):
        text = pattern.sub(" ", text)
    return normalize(_FILLER.sub("", text.strip()))


def strip_markers(text: str) -> str:
    """``text`` without marker words, corrections and leading filler (for containment checks)."""
    for pattern in (lx.STRONG, lx.CORRECTION, lx.CHANGE, lx.REPEAT):
        text = pattern.sub(" ", text)
    return _FILLER.sub("", text.strip()).strip()


# Where a sentence joins two settings: a comma or "and"/"并且" before a clause of its own.
_COORDINATED = re.compile(
    r"(?<!\s),?\s{1,3}and\s{1,3}(?=(?:also\s)?(?:put|use|keep|show|make|add|set|place|write|display|round|sort|"
    r"label|include|drop|remove|hide|name|format|bold)\b)",
    re.I,
)
# A clause that gives a reason, a consequence or a restriction of its neighbour is no setting
# of its own ("so never use …", "会被当成文本", "只保留数值").
_DEPENDENT = re.compile(
    r"(?i)^(?:so|because|since|otherwise|which|that|only|just)\b|^(?:所以|因为|否则|不然|只|仅)|"
    r"会被|会导致|会变|否则|不然"
)
_CONJUNCTION = re.compile(r"(?i)^(?:并且|而且|同时|另外|还有|also|and)[，,\s]*")


# "…YYYY年M月D日 这种格式，别用斜杠", "…as ISO dates, not slashes": a bare negated alternative
# (one word after the negation) is the other side of the same setting, not a setting of its own.
_ALTERNATIVE = re.compile(
    r"^(?:别|不要|不用|勿|不)(?:再)?(?:用|要|写|加|带)?(?:[\u4e00-\u9fff]{1,3}|\s{0,2}[\w/.-]{1,20})$|"
    r"^(?:not|no|never|(?:don'?t|do not|never) use)\s{1,3}(?:the\s{1,3})?[\w/-]{1,20}$",
    re.I,
)


def _coordinated(text: str, slot_key: str) -> list[tuple[str, bool]] | None:
    """The parts of a sentence that sets one slot and, beside it, other complete settings
    ("use two decimals and put the legend at the bottom"): (part, sets the slot) pairs, ``None``
    when the sentence is one setting. A part is a complete setting when it gives an instruction
    of its own about something (a verb and at least two content words) and sets no slot."""
    parts = [
        _CONJUNCTION.sub("", p).strip()
        for clause in split_clauses(text)
        for p in _COORDINATED.split(clause)
    ]
    # A clause that is only a marker ("From now on,") is no setting: it goes with the others.
    parts = [p for p in parts if p and feature_set(strip_markers(p))]
    if len(parts) < 2:
        return None
    tagged = [(p, any(m.key == slot_key for m in detect_slots(p))) for p in parts]
    # The slot comes first: a slot said after another clause qualifies it ("百分比显示成 %，保留
    # 一位小数" is one rule about percentages).
    if sum(1 for _, has in tagged if has) != 1 or not tagged[0][1]:
        return None
    # A fact first ("我们的 SQL 用的是 Hive，…", "Our warehouse is …"): what follows is what the
    # fact implies, one statement with it.
    if lx.FACT.search(strip_markers(tagged[0][0])) or re.match(r"(?i)our\b", tagged[0][0]):
        return None
    for part, has in tagged:
        if has:
            continue
        body = strip_markers(part)
        if (
            _ALTERNATIVE.match(body.strip(" 。."))
            or detect_slots(part)
            or len(feature_set(body)) < 2
            or _DEPENDENT.search(body)
            or lx.REASON.search(body)
        ):
            return None
        if not (_INSTRUCTION.search(body) or lx.IMPERATIVE.match(body)):
            return None
    return tagged


def _candidates(signal: Signal) -> list[tuple[str, str | None]]:
    """(text, slot) pairs to write: one clause setting two slots becomes one entry per slot, and
    a slot set beside other complete settings is written apart from them, so that each can be
    changed on its own (a later value of the slot would otherwise replace, or miss, them)."""
    if len(signal.slots) >= 2:
        return [
            (slot_template(s.key, s.value, signal.language), f"{s.key}={s.value}")
            for s in signal.slots
        ]
    slot = f"{signal.slots[0].key}={signal.slots[0].value}" if signal.slots else None
    if signal.slots and (parts := _coordinated(signal.text, signal.slots[0].key)):
        return [(part, slot if has else None) for part, has in parts]
    return [(signal.text, slot)]


def _carry_over(old: MemoryEntry, new_text: str) -> str:
    """Append the old entry's slot-free instructions that the new text does not already say."""
    extra = [
        c
        for c in split_clauses(old.text)
        if not detect_slots(c)
        and _INSTRUCTION.search(c)
        and not lx.REASON.search(c)
        and containment(c, new_text) < NEAR_DUPLICATE
    ]
    if not extra:
        return new_text
    joiner = "，" if re.search(r"[\u4e00-\u9fff]", new_text) else "; "
    return joiner.join([new_text.rstrip("。. "), *extra])


def without_old_value(text: str, old_slot: str) -> str:
    """``text`` without the clauses that only name the value it replaces ("两位太细了")."""
    key, _, old_value = old_slot.partition("=")
    clauses = split_clauses(text)
    kept = [
        c
        for c in clauses
        if not mentions_value(c, key, old_value)
        or any((m.key, m.value) != (key, old_value) for m in detect_slots(c))
    ]
    if not kept or len(kept) == len(clauses):
        return text
    joiner = "，" if re.search(r"[\u4e00-\u9fff]", text) else ", "
    return joiner.join(kept)


def without_old_values(text: str, old: str) -> str:
    """``text`` without the clauses that name only values of ``old`` ("0.5 太严了" in "对平的阈值
    改成 1 块钱吧，0.5 太严了"): the replaced value must not live on in its replacement."""
    olds = {normalize(m.group(0)) for m in _VALUE.finditer(old)}
    clauses = split_clauses(text)
    kept = [
        c
        for c in clauses
        if not (values := {normalize(m.group(0)) for m in _VALUE.finditer(c)}) or values - olds
    ]
    if not kept or len(kept) == len(clauses):
        return text
    joiner = "，" if re.search(r"[\u4e00-\u9fff]", text) else ", "
    return joiner.join(kept)


def _decide(
    doc: MemoryDocument, text: str, slot: str | None, near: float = NEAR_DUPLICATE
) -> MemoryUpdate:
    key = core_text(text)
    base = MemoryUpdate(op=UpdateOp.NONE, scope=doc.scope)
    for entry in doc.entries:
        if core_text(entry.text) == key:
            return base.model_copy(update={"entry_id": entry.id, "reason": "duplicate"})
    if slot is not None and slot.startswith("chart_ban:") and slot.endswith("=on"):
        # A ban lifted ("饼图还是可以用的") is not a rule of its own: the ban entry goes.
        slot_key = slot.split("=", 1)[0]
        banned = [e for e in doc.entries if e.slot and e.slot.split("=", 1)[0] == slot_key]
        if banned:
            return MemoryUpdate(
                op=UpdateOp.DELETE, scope=doc.scope, entry_id=banned[0].id,
                reason=f"{slot_key} lifted",
            )  # fmt: skip
        return base.model_copy(update={"reason": "nothing to lift"})
    if slot is not None:
        slot_key = slot.split("=", 1)[0]
        for entry in doc.entries:
            if entry.slot and entry.slot.split("=", 1)[0] == slot_key:
                if entry.slot == slot:
                    return base.model_copy(
                        update={"entry_id": entry.id, "reason": "same slot value"}
                    )
                return MemoryUpdate(
                    op=UpdateOp.UPDATE, scope=doc.scope, entry_id=entry.id, slot=slot,
                    text=_carry_over(entry, without_old_value(text, entry.slot)),
                    reason=f"slot {slot_key} changed",
                )  # fmt: skip
    stripped = strip_markers(text)
    for entry in doc.entries:
        if containment(stripped, entry.text) >= near:
            return base.model_copy(update={"entry_id": entry.id, "reason": "near duplicate"})
    return MemoryUpdate(
        op=UpdateOp.ADD, scope=doc.scope, entry_id=doc.next_entry_id(), text=text, slot=slot
    )


# Values, not what a statement is about: numbers, number words, colours, quoted names.
_VALUE = re.compile(
    r"#[0-9a-f]{3,6}\b|(?<![\d.,])\d{1,12}(?:[.,]\d{1,9})?|\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|"
    r"eleven|twelve|thirteen|fifteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred)\b|"
    r"[一二两三四五六七八九十百]{1,4}(?=[位个分周天月年号%])|“[^”]{1,40}”|\"[^\"]{1,40}\"|「[^」]{1,40}」",
    re.I,
)
_QUANTITY = re.compile(
    r"(?:(?<![\d.])\d{1,9}(?:\.\d{1,9})?|\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    r"twenty|thirty|sixty|ninety)\b)[\s-]?([a-z]{2,12}|[\u4e00-\u9fff]{1,2})",
    re.I,
)
# A statement about the user themself ("I'm the finance lead …", "I now head FP&A …", "我是…").
_SELF = re.compile(
    r"^(?:i'?m|i am|i (?:now |currently |also )?(?:head|lead|run|manage|work|own|cover|look after))\b|"
    r"^我(?:现在|目前)?(?:是|负责|做|在)",
    re.I,
)
# Characters that make a bigram a piece of grammar rather than of a topic ("的中", "都这").
_FUNCTION_CHARS = frozenset("的了都这那样么是也就吧在和与把被给")
# Share of the shorter statement's topic two statements must share to be about the same thing.
SAME_ATTRIBUTE = 0.15


def _topic(text: str) -> frozenset[str]:
    """What a statement is about: its content features without values and marker words."""
    body = lx.LABEL_PREFIX.sub("", strip_markers(text), count=1)
    feats = feature_set(_VALUE.sub(" ", body))
    values = feature_set(" ".join(m.group(0) for m in _VALUE.finditer(body)))
    topic = set(feats - values)
    if _SELF.search(body.strip()):
        topic.add("@self")
    # A quantity names what it measures: "12 weeks" and "13 weeks" are both a number of weeks.
    topic.update(f"@qty:{unit}" for m in _QUANTITY.finditer(body) for unit in feature_set(m[1]))
    return frozenset(topic)


def _same_attribute(new: str, old: str) -> float:
    """How much ``new`` and ``old`` are about the same thing (0.0 when not at all)."""
    a, b = _topic(new), _topic(old)
    shared = a & b
    cjk = [f for f in shared if re.search(r"[\u4e00-\u9fff]", f)]
    bigrams = [f for f in cjk if not set(f) & _FUNCTION_CHARS]
    words = len(shared) - len(cjk)
    marks = [f for f in shared if f.startswith("@")]
    if not marks and words < 2 and len(bigrams) < 2:
        return 0.0
    ratio = len(shared) / min(len(a), len(b))
    return ratio if ratio >= SAME_ATTRIBUTE else 0.0


def revised_entry(
    docs: Mapping[str, MemoryDocument], scopes: Sequence[str], text: str, sentence: str
) -> tuple[str, MemoryEntry] | None:
    """(scope, entry) that ``text`` revises: said as a change ("… now", "改成", "才是", "还是放…")
    about the same thing as an entry of one of ``scopes`` (the closest wins), else ``None``."""
    if not (lx.REVISION.search(sentence) or lx.CHANGE.search(sentence)):
        return None
    best: tuple[float, str, MemoryEntry] | None = None
    for scope in scopes:
        doc = docs.get(scope)
        for entry in doc.entries if doc else ():
            score = _same_attribute(text, entry.text) or _replaces_value(text, entry.text)
            if score and (best is None or score > best[0]):
                best = (score, scope, entry)
    return None if best is None else (best[1], best[2])


_NUMBER = (
    r"(?:\d{1,6}(?:\.\d{1,3})?|one|two|three|four|five|six|seven|eight|nine|ten|twelve|fifteen|"
    r"twenty|thirty|fifty|hundred|half|a)"
)
_EN_UNIT = re.compile(
    rf"\b{_NUMBER}(?:[\s-]{{1,3}}and a half)?[\s-]{{0,3}}"
    r"(page|word|slide|line|row|paragraph|sentence|bullet|minute|character|chart|point|item)s?\b",
    re.I,
)
_ZH_NUMBER = "\\d一二两三四五六七八九十百千半"
_ZH_UNIT = re.compile(
    rf"(?<![{_ZH_NUMBER}])[{_ZH_NUMBER}]{{1,8}}\s{{0,3}}(?:个)?(页|字|行|段|句|条|分钟|张)"
)
# Units said in either language, as one measure ("两页" and "two pages" are both pages).
_ZH_MEASURE = {"页": "page", "字": "word", "行": "line", "段": "paragraph", "句": "sentence",
               "条": "bullet", "分钟": "minute", "张": "slide"}  # fmt: skip


def _measures(text: str) -> frozenset[str]:
    """The units a text bounds an amount in ("one page max", "一页半以内" → page)."""
    found = {m.group(1).casefold() for m in _EN_UNIT.finditer(text)}
    found.update(_ZH_MEASURE[m.group(1)] for m in _ZH_UNIT.finditer(text))
    return frozenset(found)


def _resized(docs: Mapping[str, MemoryDocument], signal: Signal) -> MemoryUpdate | None:
    """The update of the entry a size follow-up revises ("make it shorter, one page max" after
    "memos stay within two pages"): a change-of-size cue and a bound in the unit of an entry
    of the signal's scope (any scope when it names no skill) — the first such entry."""
    if signal.slots or not lx.SIZE_CHANGE.search(signal.sentence):
        return None
    units = _measures(signal.text)
    if not units:
        return None
    scopes = [signal.scope]
    if signal.scope == USER_SCOPE:
        scopes += [s for s in docs if s != signal.scope]
    for scope in scopes:
        doc = docs.get(scope)
        for entry in doc.entries if doc else ():
            if entry.slot is None and units & _measures(entry.text):
                if core_text(entry.text) == core_text(signal.text):
                    return None
                return MemoryUpdate(
                    op=UpdateOp.UPDATE, scope=scope, entry_id=entry.id, text=signal.text,
                    reason="same measure, new bound",
                )  # fmt: skip
    return None


def _forget(docs: Mapping[str, MemoryDocument], topic: str) -> list[MemoryUpdate]:
    return [
        MemoryUpdate(
            op=UpdateOp.DELETE, scope=scope, entry_id=e.id, reason=f"user asked to forget: {topic}"
        )
        for scope, doc in docs.items()
        for e in doc.entries
        if forgets(topic, e.text)
    ]


def _revision(docs: Mapping[str, MemoryDocument], signal: Signal) -> MemoryUpdate | None:
    """The update of the entry ``signal`` revises by attribute, when no slot decides it.

    The signal's own scope is searched first; a statement that names no skill (scope ``user``)
    or only revises may revise an entry of any scope (the entry gives it its scope)."""
    if signal.kind not in (SignalKind.EXPLICIT, SignalKind.FACT, SignalKind.REVISION):
        return None
    if signal.slots:
        return None  # a slot says what the preference is about: the slot rule decides
    if resized := _resized(docs, signal):
        return resized
    scopes = [signal.scope]
    if signal.scope == USER_SCOPE or signal.kind is SignalKind.REVISION:
        scopes += [s for s in docs if s != signal.scope]
    for scope in scopes:
        doc = docs.get(scope)
        for entry in doc.entries if doc else ():
            same_skill = scope == signal.scope != USER_SCOPE
            swapped = substituted(signal.text, signal.sentence, entry.text, same_skill)
            if swapped is not None:
                return MemoryUpdate(
                    op=UpdateOp.UPDATE, scope=scope, entry_id=entry.id, text=swapped,
                    reason="same attribute, value replaced",
                )  # fmt: skip
    found = revised_entry(docs, scopes, signal.text, signal.sentence)
    if found is None:
        return None
    scope, entry = found
    if core_text(entry.text) == core_text(signal.text):
        return MemoryUpdate(op=UpdateOp.NONE, scope=scope, entry_id=entry.id, reason="duplicate")
    slot = f"{signal.slots[0].key}={signal.slots[0].value}" if len(signal.slots) == 1 else None
    text = without_old_values(signal.text, entry.text)
    return MemoryUpdate(
        op=UpdateOp.UPDATE, scope=scope, entry_id=entry.id, text=text, slot=slot,
        reason="same attribute, new value",
    )  # fmt: skip


def _restated(docs: Mapping[str, MemoryDocument], signal: Signal) -> MemoryUpdate | None:
    """``none`` for a rule said again ("Like I said before, JR goes in the footer"): a repeat cue
    and an entry about the same thing, whatever the wording."""
    if (
        signal.kind is SignalKind.TOOL_LESSON
        or signal.slots
        or not lx.REPEAT.search(signal.sentence)
    ):
        return None  # a slot says what the preference is about: the slot rule decides
    others = [s for s in docs if s != signal.scope] if signal.scope == USER_SCOPE else []
    scopes = [signal.scope, *others]
    for scope in scopes:
        doc = docs.get(scope)
        for entry in doc.entries if doc else ():
            if _same_attribute(signal.text, entry.text) and not _new_value(signal.text, entry.text):
                return MemoryUpdate(
                    op=UpdateOp.NONE, scope=scope, entry_id=entry.id, reason="restatement"
                )
    return None


def _replaces_value(new: str, old: str) -> float:
    """``new`` names ``old``'s value beside a value of its own and shares a word of its topic
    ("对平的阈值改成 1 块钱吧，0.5 太严了" after "金额差在 0.5 元以内的就算对平"): it replaces
    that value, however differently the rest is worded. A weak match (the lowest score), so an
    entry about the same attribute by its words wins over it."""
    olds = {normalize(m.group(0)) for m in _VALUE.finditer(old)}
    news = {normalize(m.group(0)) for m in _VALUE.finditer(new)}
    if not (olds & news) or not (news - olds):
        return 0.0
    shared = _topic(new) & _topic(old)
    content = [f for f in shared if not f.startswith("@") and not set(f) <= _FUNCTION_CHARS]
    return SAME_ATTRIBUTE if content else 0.0


def _new_value(new: str, old: str) -> bool:
    """``new`` names a value ``old`` does not (a number, a colour, a quoted name)."""
    olds = {normalize(m.group(0)) for m in _VALUE.finditer(old)}
    return any(normalize(m.group(0)) not in olds for m in _VALUE.finditer(new))


def _shares_topic(new: str, old: str) -> bool:
    """Two content features in common (words, or bigrams that are not grammar), in any mix."""
    shared = _topic(new) & _topic(old)
    return len([f for f in shared if not f.startswith("@") and not set(f) & _FUNCTION_CHARS]) >= 2


def _related_scope(docs: Mapping[str, MemoryDocument], signal: Signal) -> str:
    """The signal's scope; for an instruction that names no skill ("页码放在页脚右下角"), the skill
    of the one entry it is about ("PDF 报告的页脚要有页码…"), when exactly one skill has such."""
    if signal.scope != USER_SCOPE or signal.kind is not SignalKind.EXPLICIT:
        return signal.scope
    keys = {s.key for s in signal.slots}
    if keys:
        # "Amounts from here on: two decimal places" after a workbook rule set the decimals: the
        # value changes where the rule lives, unless the user has a rule of their own for it.
        def holders(doc: MemoryDocument) -> bool:
            return any(e.slot and e.slot.split("=", 1)[0] in keys for e in doc.entries)

        if (own := docs.get(USER_SCOPE)) is not None and holders(own):
            return signal.scope
        held = [scope for scope, doc in docs.items() if scope != USER_SCOPE and holders(doc)]
        if len(held) == 1:
            return held[0]
    if keys & CROSS_CUTTING_SLOTS:
        return signal.scope
    related = {
        scope
        for scope, doc in docs.items()
        if scope != USER_SCOPE and any(_shares_topic(signal.text, e.text) for e in doc.entries)
    }
    return related.pop() if len(related) == 1 else signal.scope


def consolidate_fallback(
    signals: Sequence[Signal], documents: Mapping[str, MemoryDocument], *, now: datetime
) -> MemoryUpdateBatch:
    """Updates for ``signals`` (in order) against ``documents`` (keyed by scope).

    The batch is self-consistent: ``apply_updates(documents, batch)`` reproduces the state the
    rules decided against, since adds carry the ids they were given here.
    """
    working = {scope: doc.model_copy(deep=True) for scope, doc in documents.items()}
    updates: list[MemoryUpdate] = []
    for signal in signals:
        if signal.kind is SignalKind.STATEMENT:
            continue
        if signal.kind is SignalKind.FORGET:
            step = _forget(working, signal.text)
        elif restated := _restated(working, signal):
            step = [restated]
        elif revision := _revision(working, signal):
            step = [revision]
        elif signal.kind is SignalKind.REVISION:
            continue  # a changed value with nothing to change is not a memory of its own
        else:
            scope = _related_scope(working, signal)
            doc = working.get(scope) or new_document(scope)
            step = []
            # "I told you before", "说过了": the user says this is already known, so a looser
            # match with an existing entry is the same rule restated.
            near = REPEATED if lx.REPEAT.search(signal.sentence) else NEAR_DUPLICATE
            for text, slot in _candidates(signal):
                decided = _decide(doc, text, slot, near)
                step.append(decided)
                doc = apply_updates(
                    {doc.scope: doc}, MemoryUpdateBatch(updates=[decided]), now=now
                ).documents.get(doc.scope, doc)
            working[doc.scope] = doc
            updates.extend(step)
            continue
        working = apply_updates(working, MemoryUpdateBatch(updates=step), now=now).documents
        updates.extend(step)
    return MemoryUpdateBatch(updates=updates)
