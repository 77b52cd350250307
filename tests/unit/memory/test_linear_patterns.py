"""Every pattern memory runs over user text is linear-time (issue 16).

A backtracking pattern that is quadratic over a long run of one character class holds the
memory-extraction process for seconds to minutes (one message or one memory ``PUT`` was enough to
fail ``/readyz``). Each compiled pattern of the memory modules, and the redaction they rely on, is
run over long runs of every character class, alone and behind the words that start its matches.
A linear pattern spends well under a millisecond per thousand characters; a quadratic one spends
seconds on the same input, so the bound below (CPU time of this process, not wall time, so a busy
machine does not make it flaky) separates them by more than an order of magnitude either way.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from types import ModuleType

import pytest

from agent_core import errors
from agent_core.errors import SchemaError
from agent_core.memory import (
    Interaction,
    _lexicon,
    _text,
    document,
    fallback,
    privacy,
    scope,
    signals,
    slots,
    tool_lessons,
)

RUN = 3_000
BOUND_S = 0.05  # CPU seconds for one call over RUN characters (linear: 0.1–3.4 ms quiet;
# a loaded machine slows even CPU time by caches shared with other work: 15 ms was hit once)

CLASSES = [
    "a", "A", "0", "1", " ", "\t", "\n", ".", "-", "_", "/", "@", ":", "=", "+", "#", "!", "?",
    "？", "，", "。", "、", "中", "“", "”", '"', "'", "<", ">", "(", "*", "%", "&", "$",
    "a ", "0 ", "a-", "0-", "0.", "a.", "a0", "aA", "中 ", "a@", "1 ", "-0", "0  ", "a_", "a/",
]  # fmt: skip
# Words that start a match of some pattern: a run behind them is the expensive case.
TRIGGERS = [
    "password is ", "key: ", "token ", "api token for the tool is ", "https://", "记住", "remember ",
    "our ", "we ", "I'm ", "card ", "工号", "+", "+86 ", "<!--", "# 个性化记忆\n", "---\n", "配色",
    "summary ", "weeks start on ", "negative ", "fiscal year starts ", "every report ", "when you ",
    "if i said ", "说“", "says '", "the docs say ", "不对", "i told you ", "sheet ", "my address ",
    "千分位", "yyyy", "用", "export ", "reply in ", "don't ", "以后", "x.", "a.b ", "-- ",
]  # fmt: skip


def _patterns(module: ModuleType) -> list[tuple[str, re.Pattern[str]]]:
    return [
        (f"{module.__name__.rsplit('.', 1)[-1]}.{name}", value)
        for name, value in vars(module).items()
        if isinstance(value, re.Pattern)
    ]


PATTERNS = [
    p
    for m in (
        _lexicon,
        _text,
        document,
        fallback,
        privacy,
        scope,
        signals,
        slots,
        tool_lessons,
        errors,
    )
    for p in _patterns(m)
]
INPUTS = [c * (RUN // len(c)) for c in CLASSES] + [
    t + run * RUN for t in TRIGGERS for run in ("a", " ")
]
# Redaction skips a pattern unless the text holds its needles ("://", "@", "=", "key", …):
# the expensive inputs are long runs followed by all of them.
NEEDLED = [c * (RUN // len(c)) + " key=x token: ://u:p@ bearer sk-" for c in (*CLASSES, "token")]
FUNCTION_INPUTS = [*INPUTS[: len(CLASSES)], *NEEDLED, *(t + "a" * RUN for t in TRIGGERS)]


def _cpu(call: Callable[[str], object], text: str) -> float:
    """The least CPU time of three calls: a quadratic pattern is slow every time, while a busy
    machine's stall (a context switch, caches flushed by other work) hits one call, not three."""
    spent = []
    for _ in range(3):
        start = time.process_time()
        call(text)
        spent.append(time.process_time() - start)
        if spent[-1] <= BOUND_S / 10:  # clearly linear: no need to ask again
            break
    return min(spent)


def test_the_modules_have_the_patterns_this_test_covers() -> None:
    names = {name for name, _ in PATTERNS}
    assert {"privacy._LONG_NUMBER", "_lexicon.QUOTATION", "slots._SUMMARY"} <= names
    assert len(PATTERNS) > 80


@pytest.mark.parametrize(("name", "pattern"), PATTERNS, ids=[n for n, _ in PATTERNS])
def test_pattern_is_linear_over_long_runs_of_every_character_class(
    name: str, pattern: re.Pattern[str]
) -> None:
    slow = []
    for text in INPUTS:
        spent = _cpu(pattern.search, text) + _cpu(pattern.findall, text)
        if spent > BOUND_S:
            slow.append((text[:24], round(spent, 3)))
    assert slow == [], f"{name} is not linear on: {slow}"


def _detect(text: str) -> object:
    return signals.detect_signals(
        Interaction.model_validate(
            {"turns": [{"role": "user", "content": text}], "skills": ["report", "excel"]}
        )  # fmt: skip
    )


def _parse(text: str) -> object:
    try:
        return document.parse_document(text, scope="user")
    except SchemaError:
        return None


@pytest.mark.parametrize(
    "function",
    [errors.redact, privacy.find_pii, privacy.scrub_text, privacy.scrub_statement, _detect, _parse],
    ids=lambda f: f.__name__,
)
def test_privacy_detection_and_parsing_are_linear(function: Callable[[str], object]) -> None:
    slow = []
    for text in FUNCTION_INPUTS:
        spent = _cpu(function, text)
        if spent > 10 * BOUND_S:  # a dozen patterns in a row
            slow.append((text[:24], round(spent, 3)))
    assert slow == []
