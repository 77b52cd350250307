"""Memory signal detection over one interaction: a high-recall gate in front of consolidation.

Only user turns and tool results are evidence; assistant text never is, and the injected
memory block (``# Personal memory`` / ``# 个性化记忆``) is cut out before anything is read (the feedback-loop guard). Questions,
hypotheticals, quotations and one-off instructions are vetoed here; secrets are scrubbed here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from . import _lexicon as lx
from ._text import Language, detect_language, feature_set, split_clauses, split_sentences
from .candidate import Signal, SignalKind, SlotValue
from .complaints import directive, rhetorical_repeat, with_subject
from .forgetting import asks_to_forget, forget_topic, replacement_clauses
from .interaction import Interaction, Turn, TurnRole
from .neighbours import AFFIRM as _AFFIRM
from .neighbours import approval_condition, approves
from .neighbours import new_content as _new_content
from .privacy import find_pii, scrub_statement, serves_a_secret
from .scope import (
    CROSS_CUTTING_SLOTS,
    DEFAULT_SKILL_KEYWORDS,
    USER_SCOPE,
    skill_of,
    skill_scope,
    tool_scope,
)
from .slots import detect_slots
from .tool_lessons import argument_delta, detect_tool_lessons

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


def _vetoed(sentence: str, probe: str, lifted: bool = False) -> bool:
    """A question, hypothetical, quotation, one-off instruction or reminder for this task.

    ``lifted``: a neighbour said this holds from now on ("…放底下吧。今后都这样。"), so a deictic
    ("那一行") names the thing the rule is about, not one instance of it."""
    if lx.QUESTION.search(sentence):
        durable = [m for m in lx.STRONG.findall(probe) if m.casefold() != "remember"]
        if not (lx.POLITE_REQUEST.match(sentence) and durable):
            return True
    if lx.REMIND_ONCE.search(probe):
        others = [m for m in lx.STRONG.findall(probe) if m.casefold() not in ("remember", "记得")]
        if not others:
            return True
    if lx.STRONG.search(probe) and not lx.STRONG.search(_QUOTED.sub(" ", probe)):
        return True  # every marker is inside someone's quoted words ("… scribbled 'always …'")
    # "忘掉星号那条吧": in a request to forget, the deictic points at the memory, not at an output
    vetoes = (
        (lx.HYPOTHETICAL, lx.QUOTATION)
        if lifted or asks_to_forget(probe)
        else (lx.HYPOTHETICAL, lx.QUOTATION, lx.ONE_OFF)
    )
    return any(p.search(probe) for p in vetoes)


_QUOTED = re.compile(
    r"“[^”]{0,200}”|「[^」]{0,200}」|\"[^\"]{0,200}\"|(?<![A-Za-z])'[^']{0,200}'(?![A-Za-z])"
)


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
    # "写 SQL 的时候别…", "When you draw delivery zones, default the radius to 3 km"
    return bool(lx.CONDITION.search(body) and (lx.WEAK.search(body) or imperative))


def _kind(sentence: str, probe: str, confirmed: bool) -> SignalKind | None:
    probe = probe.strip()
    has_slot = _has_slot(probe)
    if asks_to_forget(probe):
        return SignalKind.FORGET
    durable = bool(
        lx.STRONG.search(probe)
        or confirmed
        or (lx.CHANGE.search(probe) and has_slot)
        or _habit(sentence, probe)
        # "说过多少次了，金额保留两位小数": an instruction said again holds beyond this output
        or (lx.REPEAT.search(probe) and (has_slot or lx.WEAK.search(probe)))
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
    unlabelled = lx.DISCOURSE.sub("", lx.LABEL_PREFIX.sub("", probe, count=1), count=1)
    if lx.FACT.search(probe) or lx.FACT.search(unlabelled) or _data_fact(probe):
        return SignalKind.FACT
    if any(s.key in _CALENDAR_SLOTS for c in split_clauses(probe) for s in detect_slots(c)):
        return SignalKind.FACT  # "our fiscal year begins in January": how the business runs
    if lx.REVISION.search(probe) and _has_content(probe):
        return SignalKind.REVISION
    return SignalKind.STATEMENT if lx.STATEMENT_HINT.search(probe) else None


_CALENDAR_SLOTS = frozenset({"fiscal_year_start", "week_start"})


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
        # "…，别再弄错了", "…，以后都这样": the clause made the rule durable, it is not the rule
        and not (
            len(clauses) > 1
            and lx.LEND.search(c)
            and _lends(c, " ".join(o for o in clauses if o != c))
        )
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


@dataclass(frozen=True)
class _Context:
    """What scopes a statement besides its own words: the enabled skills with their metadata,
    the user turn it was said in and the interaction's tool calls."""

    skills: Sequence[str]
    descriptions: Mapping[str, str]
    keywords: Mapping[str, Sequence[str]]
    fallback_lang: Language
    turn_text: str = ""
    interaction_skill: str | None = None
    owners: Mapping[str, str] = field(default_factory=dict)

    def scope(self, text: str, slot_keys: Sequence[str], kind: SignalKind) -> str:
        """The statement's own skill; else, unless it is about the user (a fact or a
        cross-cutting preference), the skill its turn or its interaction is about. A statement of
        the user's role or business is the user's, whatever skill its words recall."""
        if kind in (SignalKind.FACT, SignalKind.EXPLICIT) and lx.ROLE.search(
            lx.DISCOURSE.sub("", lx.STRONG.sub("", text).strip(" ，,:："), count=1)
        ):
            return USER_SCOPE
        own = skill_of(
            text, self.skills, slot_keys=slot_keys, keywords=self.keywords,
            descriptions=self.descriptions,
        )  # fmt: skip
        if own is not None:
            return skill_scope(own)
        if kind in (SignalKind.FACT, SignalKind.FORGET) or set(slot_keys) & CROSS_CUTTING_SLOTS:
            return USER_SCOPE
        if lx.FACT.search(text) or lx.ORG_STANDARD.search(text):
            return USER_SCOPE
        turn = skill_of(
            self.turn_text, self.skills, keywords=self.keywords, descriptions=self.descriptions
        )
        found = turn or self.interaction_skill
        return USER_SCOPE if found is None else skill_scope(found)


def _sentence_signals(
    sentence: str, ctx: _Context, confirmed: bool = False, lifted: bool = False
) -> list[Signal]:
    if tag := lx.TAG_QUESTION.search(sentence):
        sentence, confirmed = sentence[: tag.start()].strip(), True
    sentence = _without_idioms(sentence)
    sentence, lent = _without_instance_clauses(sentence, lifted)
    confirmed = confirmed or lent
    probe = sentence
    if not sentence or _vetoed(sentence, probe, lifted):
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
        topic = forget_topic(lx.IDIOMS.sub(" ", scrubbed))
        lang = detect_language(topic) if feature_set(topic) else ctx.fallback_lang
        scope = ctx.scope(topic, [], kind)
        forget = Signal(
            kind=kind, scope=scope, text=topic, sentence=scrubbed, language=lang, markers=markers
        )
        # "… - we've moved to the calendar year": what holds instead is a memory of its own
        instead = [
            Signal(
                kind=SignalKind.EXPLICIT, scope=scope, text=c, sentence=scrubbed,
                language=detect_language(c), markers=markers,
            )
            for c in replacement_clauses(scrubbed)
        ]  # fmt: skip
        return [forget, *instead]
    signals = []
    for text, slots in _groups(scrubbed):
        scope = ctx.scope(text, [s.key for s in slots], kind)
        lang = detect_language(text) if feature_set(text) else ctx.fallback_lang
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


def _without_instance_clauses(sentence: str, lifted: bool) -> tuple[str, bool]:
    """A sentence that names one instance ("this column", "这一列") and also states a general
    rule ("…always get thousands separators", "…一律保留两位小数") keeps the rule's clauses: the
    instance is the complaint, the rule is what holds. Without a general clause it is vetoed.
    The flag says a marker-only clause went with the deictic ("这条以后一直有效")."""
    if lifted or not lx.ONE_OFF.search(sentence):
        return sentence, False
    clauses = split_clauses(sentence)
    repeated = bool(lx.REPEAT.search(sentence))
    limits = [
        m
        for c in clauses
        for m in lx.ONE_OFF.finditer(c)
        if not lx.INSTANCE.fullmatch(m[0])
        and not (repeated and lx.DEICTIC_ARTEFACT.fullmatch(m[0]))
    ]
    if limits:
        return sentence, False  # "just for this deck", "这次": all of it is about this output
    pointing = [c for c in clauses if lx.ONE_OFF.search(c)]
    rest = " ".join(c for c in clauses if c not in pointing)
    if len(pointing) < len(clauses) and all(_lends(c, rest) for c in pointing):
        # "…最多 5 个班，这条以后一直有效": the deictic points at the rule itself
        joiner = "，" if detect_language(sentence) == "zh" else ", "
        return joiner.join(c for c in clauses if c not in pointing), True
    general = [
        c
        for c in clauses
        if not lx.ONE_OFF.search(c) and (lx.STRONG.search(c) or lx.UNIVERSAL.search(c))
    ]
    if not general or len(general) == len(clauses):
        return sentence, False
    kept = [c for c in clauses if not lx.ONE_OFF.search(c)]
    joiner = "，" if detect_language(sentence) == "zh" else ", "
    return joiner.join(kept), False


def _lends(sentence: str, neighbour: str = "") -> bool:
    """A short sentence that only makes its neighbour durable ("Every time.", "以后都照这个来",
    "Don't make me say it twice."): a durability cue and nothing new of its own."""
    if len(sentence) > 80 or lx.QUESTION.search(sentence):
        return False
    if not (lx.STRONG.search(sentence) or lx.LEND.search(sentence)):
        return False  # (tested before the slots: two searches against every slot's)
    return not _has_slot(sentence) and _new_content(sentence, neighbour) <= 1


def _complaint(sentence: str) -> bool:
    """A report of what went wrong again ("透视表又把空白门店算进去了", "Still wrong: the chart
    starts at … again"): no instruction of its own; the rule is in the sentence after it."""
    if not (lx.REPEAT.search(sentence) or lx.CORRECTION.search(sentence)):
        return False
    if lx.STRONG.search(sentence) or lx.WEAK.search(sentence) or _has_slot(sentence):
        return False
    return not any(lx.IMPERATIVE.match(c) for c in split_clauses(sentence))


def _gap_change(
    turns: Sequence[Turn], start: int, end: int, ctx: _Context
) -> tuple[str, str | None] | None:
    """(text, skill) of the change the agent made between two user turns: its own description
    when it gave one, else the changed call (the arguments that differ from the same tool's
    previous call)."""
    said = [t.content.strip() for t in turns[start:end] if t.role is TurnRole.ASSISTANT]
    calls = [t for t in turns[start:end] if t.role is TurnRole.TOOL and t.tool_name]
    skill = None
    for call in calls:
        found = tool_scope(
            call.tool_name or "", ctx.skills, ctx.keywords, ctx.descriptions, owners=ctx.owners
        )
        if found != USER_SCOPE:
            skill = found.split(":", 1)[1]
            break
    described = next((t for t in reversed(said) if _describes(t)), None)
    if described is not None:
        text = scrub_statement(" ".join(described.split())[:300]).text
        if text:
            return text.rstrip("。. "), skill or skill_of(
                text, ctx.skills, keywords=ctx.keywords, descriptions=ctx.descriptions
            )
    # A short reply ("已重新导出", "Refitted.") says that, not what: the changed call does.
    for call in reversed(calls):
        before = [
            t
            for t in turns[:start]
            if t.role is TurnRole.TOOL and t.tool_name == call.tool_name and not t.is_error
        ]
        if not isinstance(call.arguments, dict):
            continue
        old = before[-1].arguments if before else {}
        if not isinstance(old, dict):
            continue
        delta = {
            k: v
            for k, v in argument_delta(old, call.arguments, ctx.fallback_lang).items()
            if not (k in old and k in call.arguments and _is_path(call.arguments[k]))
        }
        if before:
            delta = {k: v for k, v in delta.items() if not _is_path(call.arguments.get(k))}
        if delta:
            zh = ctx.fallback_lang == "zh"
            body = ("；" if zh else "; ").join(f"{k}: {v}" for k, v in delta.items())
            # What the call was about, from its unchanged short arguments ("metric: nps").
            about = [
                f"{k}: {v}"
                for k, v in call.arguments.items()
                if k not in delta and isinstance(v, str) and len(v) <= 30 and not _is_path(v)
            ][:2]
            name = f"{call.tool_name} ({', '.join(about)})" if about else call.tool_name
            return f"{name}: {body}", skill
    return None


# Content features a reply needs to describe a change ("I rotated the month labels 45 degrees …")
# rather than report it done ("已重新导出", "重新计算后本月 NPS 为 31"). Chinese counts character
# bigrams, which a sentence has more of than an English one has words.
_DESCRIBED = 10
_DESCRIBED_WORDS = 8


# "I split the description into Summary, Testing and Risk sections", "我把图例挪到了下方": the
# agent saying what it changed, in the first person, needs fewer words to be a description.
_FIRST_PERSON_CHANGE = re.compile(
    r"^(?:i|i've|i have) (?:\w{2,12}ly )?(?:split|moved|rotated|changed|renamed|reordered|grouped|"
    r"sorted|converted|switched|added|removed|replaced|reformatted|made|set|put|broke|turned|"
    r"merged|shortened|widened|aligned|wrapped|tilted)\b|^(?:我|已|已经)(?:把|将)",
    re.I,
)
_DESCRIBED_FIRST_PERSON = 5


def _describes(reply: str) -> bool:
    needed = _DESCRIBED if re.search(r"[\u4e00-\u9fff]", reply) else _DESCRIBED_WORDS
    if _FIRST_PERSON_CHANGE.match(reply.strip()):
        needed = min(needed, _DESCRIBED_FIRST_PERSON)
    return len(feature_set(reply)) >= needed


def _is_path(value: object) -> bool:
    return isinstance(value, str) and bool(lx.FILE_REF.search(value) or "/" in value)


def _speaks(sentence: str) -> bool:
    """A sentence with content of its own that is not a question (a neighbour to lend to)."""
    return len(feature_set(sentence)) >= 2 and not lx.QUESTION.search(sentence)


@dataclass
class _Sentence:
    """A sentence of a user turn and what its neighbours made of it."""

    text: str
    durable: bool = False  # a neighbour (or a "Please remember:") made it durable
    lifted: bool = False  # a neighbour said it holds from now on: a deictic is no veto
    skip: bool = False  # a marker, an approval or a complaint: not a memory of its own


def _turn_signals(
    text: str,
    ctx: _Context,
    gap: Callable[[], tuple[str, str | None] | None],
    said_before: bool = False,
    context: str = "",
) -> list[Signal]:
    """The signals of one user turn: each sentence judged with its neighbours.

    ``said_before``: the user's previous turn of this interaction held a memory of its own. A
    turn that only makes something durable ("以后都这样。", "Every time.") then lends to that
    rule, not to the agent's reply in between, which only acknowledged it ("好的，这次已按
    0.5 元容差处理"); after a report of a symptom the reply is what describes the change.
    ``context``: the turns since the previous user turn, with it (what an approval approves)."""
    items: list[_Sentence] = []
    for sentence in split_sentences(text):
        if len(sentence) > MAX_SENTENCE_CHARS:  # a rule worth keeping is short
            continue
        prefix = lx.REMEMBER_PREFIX.match(sentence)
        if prefix and sentence[prefix.end() :].strip():
            items.append(_Sentence(sentence[prefix.end() :].strip(), durable=True))
        else:
            items.append(_Sentence(sentence))
    signals: list[Signal] = []
    previous: _Sentence | None = None  # the nearest earlier sentence with content
    for i, item in enumerate(items):
        if (
            i
            and not items[i - 1].skip
            and (_speaks(items[i - 1].text) or rhetorical_repeat(items[i - 1].text))
        ):
            previous = items[i - 1]
        sentence = item.text
        if approves(sentence, context) or (previous is None and _lends(sentence)):
            item.skip = True
            if previous is None and said_before:
                continue  # the rule said just before is already a memory
            change = gap()
            if change is not None and not lx.ONE_OFF.search(_AFFIRM.sub(" ", sentence)):
                body, skill = change
                if condition := approval_condition(sentence):
                    body = (
                        f"{body}（{condition}）"
                        if ctx.fallback_lang == "zh"
                        else f"{body} ({condition})"
                    )
                scope = skill_scope(skill) if skill else ctx.scope(body, [], SignalKind.EXPLICIT)
                signals.append(
                    Signal(
                        kind=SignalKind.EXPLICIT, scope=scope, text=body, sentence=sentence,
                        language=detect_language(body), markers=_markers(sentence),
                    )
                )  # fmt: skip
            elif previous is not None:
                previous.durable = previous.lifted = True
            continue
        if previous is None:
            continue
        if (
            _complaint(previous.text)
            and (
                _kind(sentence, sentence, False) not in (None, SignalKind.STATEMENT)
                or directive(sentence)
            )
            and _has_content(sentence)
        ):
            # "…又把空白门店算进去了。空白门店一律剔除。": the complaint reports what went wrong
            # again; the rule after it is what holds, and holds beyond this output.
            previous.skip = True
            item.durable = True
            item.text = with_subject(sentence, previous.text)
        elif _lends(sentence, previous.text):
            item.skip = True
            previous.durable = previous.lifted = True
    secret_before = False
    for item in items:
        # "Here's my password: …. You have my permission to hold on to it …": a sentence that
        # serves the secret said just before it goes with it.
        serves = secret_before and serves_a_secret(item.text)
        secret_before = bool(find_pii(item.text)) or serves
        if not item.skip and not serves:
            signals.extend(_sentence_signals(item.text, ctx, item.durable, item.lifted))
    return signals


def detect_signals(
    interaction: Interaction, *, keywords: Mapping[str, Sequence[str]] = DEFAULT_SKILL_KEYWORDS
) -> list[Signal]:
    """Candidate memories of one interaction, in turn order: user statements, then tool lessons.

    Each sentence is judged with its neighbours in the same user turn: a marker-only sentence
    ("Every time.", "以后都照这个来") makes its neighbour durable and is never a memory of its own;
    one that approves what the agent just did and makes it general takes its content from the
    agent's described change or changed call. ``STATEMENT`` signals are hints for an LLM
    consolidator; the rule fallback does not write them.
    """
    interaction = bounded(interaction)
    user_lang = detect_language(interaction.user_text())
    descriptions = interaction.descriptions()
    owners = interaction.tool_owners()
    tool_skill = None
    for turn in interaction.turns:
        if turn.role is TurnRole.TOOL and turn.tool_name:
            found = tool_scope(
                turn.tool_name, interaction.skills, keywords, descriptions, owners=owners
            )
            if found != USER_SCOPE:
                tool_skill = found.split(":", 1)[1]
                break
    base = _Context(interaction.skills, descriptions, keywords, user_lang, owners=owners)
    interaction_skill = tool_skill or skill_of(
        interaction.user_text(), interaction.skills, keywords=keywords, descriptions=descriptions
    )
    signals: list[Signal] = []
    last_user = 0
    said_before = False  # the previous user turn held a memory of its own
    turns = interaction.turns
    for index, turn in enumerate(turns):
        if turn.role is not TurnRole.USER:
            continue
        text = lx.MEMORY_BLOCK.sub("\n", turn.content)
        ctx = replace(base, turn_text=text, interaction_skill=interaction_skill)
        start = last_user

        def gap(start: int = start, end: int = index, ctx: _Context = ctx) -> Any:
            return _gap_change(turns, start, end, ctx) if start < end else None

        context = " ".join(t.content for t in turns[max(start - 1, 0) : index])
        own = _turn_signals(text, ctx, gap, said_before, context)
        said_before = any(s.kind is not SignalKind.STATEMENT for s in own)
        signals.extend(own)
        last_user = index + 1
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
