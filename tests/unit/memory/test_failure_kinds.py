"""One test per failure kind of rule-based consolidation (issue 23), with examples of its own.

None of these sentences is from the labelled set: they check that the rules generalise.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agent_core.memory import (
    Interaction,
    MemoryDocument,
    apply_updates,
    consolidate_fallback,
    detect_signals,
    render_document,
)

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool(name: str, args: Any, content: str, error: bool = False) -> dict[str, Any]:
    return {"role": "tool", "content": content, "is_error": error, "tool_name": name,
            "arguments": args}  # fmt: skip


def remember(
    *interactions: list[dict[str, Any]] | str, skills: tuple[str, ...] = ()
) -> dict[str, MemoryDocument]:
    """Documents after consolidating each interaction in turn, from empty memory."""
    docs: dict[str, MemoryDocument] = {}
    for turns in interactions:
        turns = [user(turns)] if isinstance(turns, str) else turns
        ix = Interaction.model_validate({"turns": turns, "skills": list(skills)})
        batch = consolidate_fallback(detect_signals(ix), docs, now=NOW)
        docs = apply_updates(docs, batch, now=NOW).documents
    return docs


def entries(docs: dict[str, MemoryDocument]) -> list[tuple[str, str]]:
    return [(scope, e.text) for scope, doc in docs.items() for e in doc.entries]


# -- scope ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "skills", "scope"),
    [
        ("From now on every slide gets the logo in the corner.", ("ppt", "report"), "skill:ppt"),
        ("以后导出的 Excel 都把表头加粗。", ("excel", "report"), "skill:excel"),
        ("Always label the y axis with its unit.", ("chart", "sql"), "skill:chart"),
        (
            "When cleaning data, always drop the test accounts first.",
            ("data_cleaning", "report"),
            "skill:data_cleaning",
        ),
        ("Always round to one decimal.", ("excel", "report"), "user"),
        ("以后都用中文回复我。", ("report",), "user"),
        ("We report everything in CAD.", ("report",), "user"),
    ],
)
def test_scope_of_a_skills_rule_is_the_skill_and_a_cross_cutting_one_the_user(
    text: str, skills: tuple[str, ...], scope: str
) -> None:
    docs = remember(text, skills=skills)
    assert [s for s, _ in entries(docs)] == [scope], entries(docs)


# -- supersession -----------------------------------------------------------------------------


def test_supersession_a_new_value_replaces_the_old_in_the_same_entry() -> None:
    docs = remember("Always show two decimal places.", "From now on, one decimal is enough.")
    assert [t for _, t in entries(docs)] == ["From now on, one decimal is enough"]


def test_supersession_across_languages() -> None:
    docs = remember("以后都用英文回复。", "Please reply in Chinese from now on.")
    texts = [t for _, t in entries(docs)]
    assert texts == ["Please reply in Chinese from now on"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            "Always put the executive summary first in reports.",
            "Reports should open with the summary, like I said.",
        ),
        ("以后周从周一开始算。", "记住我们一周从星期一开始。"),
        ("By default show negative numbers in red.", "Negative numbers in red, always."),
    ],
)
def test_supersession_a_restatement_is_not_added_again(first: str, second: str) -> None:
    docs = remember(first, second, skills=("report",))
    assert len(entries(docs)) == 1, entries(docs)


@pytest.mark.parametrize(
    ("first", "second", "old", "new"),
    [
        ("以后金额都保留两位小数。", "金额还是保留零位小数吧，两位看着太乱", "两位", "零位"),
        (
            "Always show three decimal places.",
            "From now on use one decimal place, three decimals is noise.",
            "three",
            "one",
        ),
    ],
)
def test_supersession_the_new_entry_does_not_name_the_replaced_value(
    first: str, second: str, old: str, new: str
) -> None:
    docs = remember(first, second)
    (text,) = [t for _, t in entries(docs)]
    assert new in text and old not in text, text


@pytest.mark.parametrize(
    ("first", "second", "old", "new"),
    [
        ("以后金额都用千元为单位", "金额改成元吧，千元不够细", "千元", "元"),
        (
            "Going forward, show times in UTC.",
            "Switch the times to Eastern time, UTC is confusing for the team.",
            "UTC",
            "Eastern",
        ),
    ],
)
def test_supersession_a_changed_unit_or_time_zone_replaces_the_old(
    first: str, second: str, old: str, new: str
) -> None:
    (text,) = [t for _, t in entries(remember(first, second))]
    assert new in text and old not in text, text


def test_supersession_a_lifted_ban_removes_the_ban() -> None:
    docs = remember("折线图以后别用了", "折线图还是可以用的", skills=("chart",))
    assert entries(docs) == []


def test_supersession_a_paraphrase_said_to_be_a_repeat_is_not_added_again() -> None:
    docs = remember(
        "导出的 Excel 冻结首行并且首列设为宽列",
        "冻结首行、首列加宽，跟你说过了",
        skills=("excel",),
    )
    assert len(entries(docs)) == 1, entries(docs)


def test_supersession_keeps_sibling_slots() -> None:
    docs = remember("Weeks start on Sunday for us.", "Actually, go back to Monday as week start.")
    # The update keeps the instruction, not the filler around it ("Actually, …").
    assert [t for _, t in entries(docs)] == ["go back to Monday as week start"]


# -- transient and task-local -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Remember to send this one to Lee as a CSV.",
        "That's wrong, I meant the EMEA numbers.",
        "不对，我要的是上周的。",
        "固定资产明细帮我导出来。",
        "统一社会信用代码那一列放到最后。",
        "下次开会前把这张表更新一下。",
        "Use the test schema for now.",
        "这一版先别加水印。",
        "每次都要我提醒你，真烦。",
        "My boss always says 'never round percentages', do you agree?",
        "The style guide says charts should never be 3D.",
    ],
)
def test_transient_and_task_local_requests_leave_memory_untouched(text: str) -> None:
    assert entries(remember(text, skills=("report", "excel"))) == []


# -- secrets ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Remember my Visa 4000 1234 5678 9010 for the hotel booking.", "40001234"),
        ("记住我的银行卡号 6228 4800 1234 5678 910，发工资用。", "62284800"),
        ("My staff ID is 7730215, please remember it for the HR forms.", "7730215"),
        ("我的身份证号码 320102198812120034 帮我记一下，以后填表用。", "3201021988"),
        ("The vault PIN is 9921, keep it handy when you export.", "9921"),
        ("Remember my home address: 88 Pine Street, Apt 4.", "pine"),
        ("我家地址是朝阳区建国路 88 号，记住。", "建国路"),
        ("The token for the finance API is fin_7c2d9e4f1a8b3c6d5e0f2a, always use it.", "fin_7c2d"),
    ],
)
def test_secrets_and_the_rest_of_their_sentence_are_not_written(text: str, secret: str) -> None:
    docs = remember(text, skills=("report",))
    rendered = "".join(render_document(d) for d in docs.values()).replace(" ", "").casefold()
    assert secret.casefold() not in rendered
    assert entries(docs) == [], entries(docs)


def test_secrets_a_separate_preference_in_the_same_sentence_survives() -> None:
    docs = remember(
        "My card is 5500 0000 0000 0004, and by default convert all amounts to GBP.",
        skills=("report",),
    )
    assert [t for _, t in entries(docs)] == ["by default convert all amounts to GBP"]


# -- lessons ----------------------------------------------------------------------------------


def test_lessons_from_tool_errors_are_the_change_that_worked() -> None:
    docs = remember(
        [
            user("把数据导出成一个 sheet。"),
            tool(
                "excel_write",
                {"sheet_name": "2025年上半年全国各大区销售额与利润率汇总分析"},
                "ValueError: sheet name longer than 31 characters",
                error=True,
            ),
            tool("excel_write", {"sheet_name": "上半年销售汇总"}, "ok"),
        ],
        [
            user("Draw a waterfall of the bridge."),
            tool("chart_render", {"type": "waterfall"}, "Unsupported chart type 'waterfall'", True),
            tool("chart_render", {"type": "bar", "stacked": True}, "ok"),
        ],
        skills=("excel", "chart"),
    )
    scopes = dict(entries(docs))
    assert "31" in scopes["skill:excel"] and "waterfall" in scopes["skill:chart"]


def test_lessons_not_from_a_retry_or_a_user_fix() -> None:
    docs = remember(
        [
            user("Run it."),
            tool("sql_query", {"sql": "SELECT 1"}, "timeout", error=True),
            tool("sql_query", {"sql": "SELECT 1"}, "1 row"),
        ],
        [
            user("Open the file."),
            tool("excel_read", {"path": "a.xlsx"}, "FileNotFoundError", error=True),
            user("It's b.xlsx."),
            tool("excel_read", {"path": "b.xlsx"}, "ok"),
        ],
        skills=("sql", "excel"),
    )
    assert entries(docs) == []


# -- implicit facts and corrections of output shape -------------------------------------------


@pytest.mark.parametrize(
    ("text", "word"),
    [
        (
            "I'm the controller for the Nordics, so unless I say otherwise use Nordic entities only.",
            "Nordic",
        ),
        ("Our fiscal year starts in October.", "October"),
        ("We report everything in CHF.", "CHF"),
        ("我们团队说的复购是指 90 天内下过两单。", "复购"),
        ("The orders table is sales.fact_orders.", "fact_orders"),
    ],
)
def test_implicit_facts_without_a_marker_are_remembered(text: str, word: str) -> None:
    texts = [t for _, t in entries(remember(text, skills=("sql", "report")))]
    assert len(texts) == 1 and word in texts[0], texts


@pytest.mark.parametrize(
    "text",
    ["Don't transpose the table, keep months as columns.", "别把日期拆成两列，保持一列。"],
)
def test_corrections_of_output_shape_are_remembered(text: str) -> None:
    assert len(entries(remember(text, skills=("excel",)))) == 1
