"""Memory signal detection over one interaction: a high-recall gate in front of consolidation.

Only user turns and tool results are evidence; assistant text never is, and the injected
``# 个性化记忆`` block is cut out before anything is read (the feedback-loop guard). Questions,
hypotheticals, quotations and one-off instructions are vetoed here; secrets are scrubbed here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from . import _lexicon as lx
from ._text import Language, detect_language, feature_set, split_clauses, split_sentences
from .candidate import Signal, SignalKind, SlotValue
from .interaction import Interaction, TurnRole
from .privacy import scrub_statement
from .scope import DEFAULT_SKILL_KEYWORDS, resolve_scope
from .slots import detect_slots
from .tool_lessons import detect_tool_lessons

__all__ = [
    "MAX_INTERACTION_CHARS",
    "MAX_SENTENCE_CHARS",
    "MAX_TURNS",
    "MAX_TURN_CHARS",
    "bounded",
    "detect_signals",
    "has_memory_signal",
]

# Limits where detection's work grows with its input (a long message must not stall the service).
MAX_TURN_CHARS = 8_000
MAX_TURNS = 200
MAX_INTERACTION_CHARS = 32_000
MAX_SENTENCE_CHARS = 600


def _markers(text: str) -> list[str]:
    found: list[str] = []
    for pattern in (lx.STRONG, lx.WEAK, lx.CORRECTION, lx.CHANGE):
        found.extend(m.group(0) for m in pattern.finditer(text))
    return found


def _has_content(text: str) -> bool:
    """A slot, or something left once marker words go (rejects "还是不行", "remember that")."""
    rest = lx.IDIOMS.sub(" ", text)
    for pattern in (lx.STRONG, lx.WEAK, lx.CORRECTION, lx.CHANGE, lx.REPEAT):
        rest = pattern.sub(" ", rest)
    feats = {f for f in feature_set(rest) if len(f) > 1 and f not in _EMPTY_BIGRAMS}
    return len(feats) >= 2 or any(detect_slots(c) for c in split_clauses(text))


# Bigrams that carry no content of their own ("这个之前说过了" says nothing once markers go).
_EMPTY_BIGRAMS = frozenset(["这个", "那个", "这样", "一下", "我们", "你们", "的话", "就是", "一个"])


def _vetoed(sentence: str, probe: str) -> bool:
    """A question, hypothetical, quotation, one-off instruction or reminder for this task."""
    if lx.QUESTION.search(sentence):
        durable = [m for m in lx.STRONG.findall(probe) if m.casefold() != "remember"]
        if not (lx.POLITE_REQUEST.match(sentence) and durable):
            return True
    if lx.REMIND_ONCE.search(probe):
        others = [m for m in lx.STRONG.findall(probe) if m.casefold() != "remember"]
        if not others:
            return True
    return any(p.search(probe) for p in (lx.HYPOTHETICAL, lx.QUOTATION, lx.ONE_OFF))


def _has_slot(text: str) -> bool:
    return any(detect_slots(c) for c in split_clauses(text))


def _habit(sentence: str, probe: str) -> bool:
    """An instruction about every output: a quantifier over them, or a 'when you …' habit."""
    body = probe.strip()
    clauses = split_clauses(body)
    imperative = bool(any(lx.IMPERATIVE.match(c) for c in clauses) or lx.WEAK.search(body))
    if lx.UNIVERSAL.search(body) and (imperative or _has_slot(body) or lx.FACT.search(body)):
        return True
    if imperative and lx.ORG_STANDARD.search(body):
        return True
    return bool(lx.CONDITION.search(body) and lx.WEAK.search(body))


def _kind(sentence: str, probe: str, confirmed: bool) -> SignalKind | None:
    probe = probe.strip()
    has_slot = _has_slot(probe)
    if lx.FORGET.search(probe):
        return SignalKind.FORGET
    durable = bool(
        lx.STRONG.search(probe)
        or confirmed
        or (lx.CHANGE.search(probe) and has_slot)
        or _habit(sentence, probe)
    )
    if lx.CORRECTION.search(probe):
        # A correction of this output ("that's wrong, I meant Q3") is not a memory; one that
        # restates a rule ("I told you before: …", "不要合并单元格") is.
        general = durable or lx.REPEAT.search(probe) or lx.WEAK.search(probe) or has_slot
        return SignalKind.CORRECTION if general else None
    if durable:
        return SignalKind.EXPLICIT
    if lx.WEAK.search(probe):
        instance = lx.TASK_OPENER.match(probe) and not lx.CONDITION.search(probe)
        return None if instance or lx.FILE_REF.search(probe) else SignalKind.EXPLICIT
    if lx.FACT.search(probe) or _data_fact(probe):
        return SignalKind.FACT
    return SignalKind.STATEMENT if lx.STATEMENT_HINT.search(probe) else None


def _without_idioms(sentence: str) -> str:
    """The sentence without the clauses that hold an idiom ("不要紧", "never mind", "要我提醒")."""
    if not lx.IDIOMS.search(sentence):
        return sentence
    kept = [c for c in split_clauses(sentence) if not lx.IDIOMS.search(c)]
    joiner = "，" if detect_language(sentence) == "zh" else ", "
    return joiner.join(kept)


def _data_fact(probe: str) -> bool:
    """Where the user's data lives ("the customer table is core.dim_customer")."""
    objects = [m for m in lx.DATA_OBJECT.finditer(probe) if not lx.FILE_REF.search(m.group(0))]
    if not objects or lx.TASK_OPENER.match(probe):
        return False
    return bool(re.search(r"(?i)\b(?:is|are|lives?|live in|stored|sits?)\b|是|在|叫", probe))


def _instruction(text: str) -> str:
    """The statement without clauses that only complain or repeat ("你又把表头合并了", "说过了")."""
    clauses = split_clauses(text)
    kept = [
        c
        for c in clauses
        if not (
            lx.ASSISTANT_DID.search(c)
            or lx.FILLER.match(c)
            and len(feature_set(lx.FILLER.sub(" ", c))) < 2
        )
        and not (lx.CORRECTION.search(c) and not _has_content(c))
    ]
    if not kept or len(kept) == len(clauses):
        return text
    joiner = "，" if detect_language(text) == "zh" else ", "
    return joiner.join(kept)


def _groups(text: str) -> list[tuple[str, list[SlotValue]]]:
    """Split a statement where it sets two different preferences; reasons stay attached."""
    clauses = split_clauses(text)
    groups: list[tuple[list[str], list[SlotValue]]] = []
    for clause in clauses:
        slots = [SlotValue(key=s.key, value=s.value) for s in detect_slots(clause)]
        keys = {s.key for g in groups for s in g[1]}
        if slots and groups and groups[-1][1] and not {s.key for s in slots} <= keys:
            groups.append(([clause], slots))
        elif groups:
            groups[-1][0].append(clause)
            groups[-1][1].extend(s for s in slots if s.key not in keys)
        else:
            groups.append(([clause], slots))
    if len(groups) <= 1:
        return [(text.strip(" 。.!！?？"), groups[0][1] if groups else [])]
    joiner = "，" if detect_language(text) == "zh" else ", "
    return [(joiner.join(c), s) for c, s in groups]


def _forget_topic(probe: str) -> str:
    match = lx.FORGET.search(probe)
    rest = probe[match.end() :] if match else probe
    return split_clauses(rest)[0] if split_clauses(rest) else rest


def _sentence_signals(
    sentence: str,
    skills: Sequence[str],
    fallback_lang: Language,
    keywords: Mapping[str, Sequence[str]],
) -> list[Signal]:
    confirmed = False
    if tag := lx.TAG_QUESTION.search(sentence):
        sentence, confirmed = sentence[: tag.start()].strip(), True
    sentence = _without_idioms(sentence)
    probe = sentence
    if not sentence or _vetoed(sentence, probe):
        return []
    kind = _kind(sentence, probe, confirmed)
    if kind is None:
        return []
    scrubbed = scrub_statement(sentence).text
    if scrubbed is not None and scrubbed != sentence:
        # What is left after a secret went must be a memory on its own, not by the markers of
        # the clause that held the secret ("记住我的护照号 …，出差订机票要用" leaves nothing).
        kind = _kind(scrubbed, scrubbed, False)
        if kind is None:
            return []
    if scrubbed is None or (kind is not SignalKind.FORGET and not _has_content(scrubbed)):
        return []
    # ``sentence`` keeps the clauses ``_instruction`` drops: "说过了" / "as I said" there tells
    # the consolidator that the rule is a restatement of something already remembered.
    whole = scrubbed
    scrubbed = _instruction(scrubbed)
    markers = _markers(scrubbed)
    if kind is SignalKind.FORGET:
        topic = _forget_topic(lx.IDIOMS.sub(" ", scrubbed))
        lang = detect_language(topic) if feature_set(topic) else fallback_lang
        scope = resolve_scope(topic, skills, keywords=keywords)
        return [
            Signal(
                kind=kind,
                scope=scope,
                text=topic,
                sentence=scrubbed,
                language=lang,
                markers=markers,
            )
        ]
    signals = []
    for text, slots in _groups(scrubbed):
        scope = resolve_scope(text, skills, slot_keys=[s.key for s in slots], keywords=keywords)
        lang = detect_language(text) if feature_set(text) else fallback_lang
        signals.append(
            Signal(
                kind=kind,
                scope=scope,
                text=text,
                sentence=whole,
                language=lang,
                markers=markers,
                slots=slots,
            )
        )
    return signals


def detect_signals(
    interaction: Interaction, *, keywords: Mapping[str, Sequence[str]] = DEFAULT_SKILL_KEYWORDS
) -> list[Signal]:
    """Candidate memories of one interaction, in turn order: user statements, then tool lessons.

    ``STATEMENT`` signals are hints for an LLM consolidator; the rule fallback does not write them.
    """
    interaction = bounded(interaction)
    user_lang = detect_language(interaction.user_text())
    signals: list[Signal] = []
    for turn in interaction.turns:
        if turn.role is not TurnRole.USER:
            continue
        text = lx.MEMORY_BLOCK.sub("\n", turn.content)
        for sentence in split_sentences(text):
            if len(sentence) <= MAX_SENTENCE_CHARS:  # a rule worth keeping is short
                signals.extend(_sentence_signals(sentence, interaction.skills, user_lang, keywords))
    signals.extend(detect_tool_lessons(interaction, user_lang, keywords=keywords))
    return signals


def bounded(interaction: Interaction) -> Interaction:
    """The part of ``interaction`` detection reads: the work grows with it, so it is capped.

    At most :data:`MAX_TURNS` turns, :data:`MAX_TURN_CHARS` of each and
    :data:`MAX_INTERACTION_CHARS` in all (turns past that budget are not read).
    """
    turns, budget = [], MAX_INTERACTION_CHARS
    for turn in interaction.turns[:MAX_TURNS]:
        if budget <= 0:
            break
        content = turn.content[: min(MAX_TURN_CHARS, budget)]
        budget -= len(content)
        turns.append(
            turn if content == turn.content else turn.model_copy(update={"content": content})
        )
    if len(turns) == len(interaction.turns) and all(
        a is b for a, b in zip(turns, interaction.turns, strict=True)
    ):
        return interaction
    return interaction.model_copy(update={"turns": turns})


def has_memory_signal(interaction: Interaction) -> bool:
    """True when consolidation has anything to look at (the cheap gate before queueing)."""
    return bool(detect_signals(interaction))
