"""Signal detection: markers fire, vetoes hold, secrets never pass, scope and language are set."""

import pytest

from agent_core.memory import (
    Interaction,
    SignalKind,
    Turn,
    TurnRole,
    detect_signals,
    has_memory_signal,
)


def _ix(*user: str, skills: tuple[str, ...] = (), assistant: str = "好的") -> Interaction:
    turns = [Turn(role=TurnRole.USER, content=u) for u in user]
    turns.append(Turn(role=TurnRole.ASSISTANT, content=assistant))
    return Interaction(turns=turns, skills=list(skills))


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("记住，以后日期一律用 YYYY-MM-DD。", SignalKind.EXPLICIT),
        ("金额默认用万元。", SignalKind.EXPLICIT),
        ("From now on, reply in English.", SignalKind.EXPLICIT),
        ("Never use pie charts.", SignalKind.EXPLICIT),
        ("不对，我之前说过了，小数保留一位。", SignalKind.CORRECTION),
        ("That's wrong, I told you before: dates are DD/MM/YYYY.", SignalKind.CORRECTION),
        ("I'm the head of FP&A for EMEA.", SignalKind.FACT),
        ("我们说的 GMV 是含退款的口径。", SignalKind.FACT),
        ("Forget what I said about the methodology section.", SignalKind.FORGET),
    ],
)
def test_markers_produce_their_kind(text: str, kind: SignalKind) -> None:
    signals = detect_signals(_ix(text))
    assert [s.kind for s in signals] == [kind]


@pytest.mark.parametrize(
    "text",
    [
        "你能记住我上次说的话吗？",  # question
        "下次开会是几号？",
        "What if I told you to always use EUR?",  # hypothetical
        "假如我说以后都不要表格了，你会怎么做",
        "如果我让你以后都用英文，你能做到吗？",
        "他说“以后所有报表都用红色标题”。",  # quotation
        "The README says 'always use UTC timestamps'.",
        "这次的报表先用元吧。",  # one-off
        "Just for this deck, always use a pie chart.",
        "不要紧，慢慢来。",  # idioms
        "Never mind, it's fine.",
        "以后再说吧。",
        "还是不行。",  # correction with nothing to remember
        "文件名应该是 sales_2024.xlsx",  # instance, weak marker only
        "帮我画个图，不要太花哨。",  # task request, weak marker only
    ],
)
def test_vetoed_sentences_yield_nothing(text: str) -> None:
    assert detect_signals(_ix(text)) == []


def test_polite_request_with_durable_marker_is_not_a_question() -> None:
    signals = detect_signals(_ix("Could you please always put the totals row at the bottom?"))
    assert [s.kind for s in signals] == [SignalKind.EXPLICIT]


def test_assistant_text_and_injected_block_are_never_evidence() -> None:
    echo = "# 个性化记忆\n- 以后日期统一用 YYYY-MM-DD\n"
    ix = _ix("好的谢谢", assistant=echo + "以后我都会用万元显示金额，记住了。")
    assert detect_signals(ix) == []
    pasted = _ix(echo + "# 问题\n今天天气如何")
    assert detect_signals(pasted) == []


def test_secret_only_request_yields_nothing_and_mixed_keeps_preference() -> None:
    assert detect_signals(_ix("记住我的 key：sk-proj-7fQ2xLmN9pR4tV8wY1zA3bC5")) == []
    signals = detect_signals(
        _ix("BI 密码是 Qw!2024bi，以后导出的报表默认用 PDF。", skills=("report",))
    )
    assert len(signals) == 1
    assert "Qw!2024bi" not in signals[0].text and "Qw!2024bi" not in signals[0].sentence
    assert "PDF" in signals[0].text


def test_scope_follows_skill_and_cross_cutting_slots() -> None:
    skills = ("excel", "chart")
    (chart,) = detect_signals(_ix("以后图表默认用折线图。", skills=skills))
    assert chart.scope == "skill:chart"
    (date,) = detect_signals(_ix("以后日期用 YYYY-MM-DD。", skills=skills))
    assert date.scope == "user"
    (named,) = detect_signals(_ix("Excel 里的日期默认用 YYYY-MM-DD。", skills=skills))
    assert named.scope == "skill:excel"
    (disabled,) = detect_signals(_ix("以后图表默认用折线图。", skills=("excel",)))
    assert disabled.scope == "user"


def test_two_preferences_in_one_sentence_become_two_signals_with_language() -> None:
    signals = detect_signals(_ix("金额以后都用万元，保留两位小数。"))
    assert [(s.slots[0].key, s.slots[0].value) for s in signals] == [
        ("amount_unit", "万元"),
        ("decimals", "2"),
    ]
    assert {s.language for s in signals} == {"zh"}
    (en,) = detect_signals(_ix("Always show currency in USD."))
    assert en.language == "en"


def test_has_memory_signal_gate() -> None:
    assert has_memory_signal(_ix("记住：周报先放核心指标。"))
    assert not has_memory_signal(_ix("你好"))
