"""One test per input kind of issue 37, in English and Chinese, with sentences of their own.

None of these sentences is from the fresh labelled set (``tests/data/memory/fresh``): they check
that the rules are general. For every kind, an English and a Chinese case failed on main before
the change (checked by running this file against main's package); three cases are guards that
already held there (an English "Remember to …" and a Chinese "别忘了 …" reminder, a Chinese
heading for a Chinese speaker).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agent_core.memory import (
    Interaction,
    MemoryDocument,
    SignalKind,
    apply_updates,
    consolidate_fallback,
    detect_signals,
    render_document,
    render_injection,
)

NOW = datetime(2026, 3, 1, tzinfo=UTC)
Skills = list[str | dict[str, str]]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def said(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    """An assistant turn, with transcript-style tool calls."""
    return {"role": "assistant", "content": text, "tool_calls": list(calls)}


def call(cid: str, name: str, args: Any) -> dict[str, Any]:
    return {"id": cid, "name": name, "arguments": args}


def result(cid: str, name: str, content: str, error: bool = False) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "tool_name": name, "content": content,
            "is_error": error}  # fmt: skip


def remember(
    *interactions: list[dict[str, Any]] | str, skills: Skills | None = None
) -> dict[str, MemoryDocument]:
    """Documents after consolidating each interaction in turn, from empty memory."""
    docs: dict[str, MemoryDocument] = {}
    for turns in interactions:
        turns = [user(turns)] if isinstance(turns, str) else turns
        ix = Interaction.model_validate({"turns": turns, "skills": skills or []})
        docs = apply_updates(
            docs, consolidate_fallback(detect_signals(ix), docs, now=NOW), now=NOW
        ).documents
    return docs


def entries(docs: dict[str, MemoryDocument]) -> list[tuple[str, str]]:
    return [(scope, e.text) for scope, doc in sorted(docs.items()) for e in doc.entries]


def texts(docs: dict[str, MemoryDocument]) -> list[str]:
    return [t for _, t in entries(docs)]


# -- 1. a rule made durable by a short next sentence -------------------------------------------


@pytest.mark.parametrize(
    ("text", "rule", "marker"),
    [
        ("Cap every warehouse result at 2,000 rows. Don't make me say it twice.", "2,000", "twice"),
        ("周报里的金额以千元为单位。以后都照这个来。", "千元", "照这个来"),
    ],
    ids=["en", "zh"],
)
def test_kind1_a_marker_only_sentence_makes_its_neighbour_durable(
    text: str, rule: str, marker: str
) -> None:
    found = texts(remember(text))
    assert len(found) == 1 and rule in found[0], found
    assert marker not in found[0]


# -- 2. approval of the agent's fix, made general ----------------------------------------------


def test_kind2_en_the_rule_is_the_agents_described_change() -> None:
    docs = remember(
        [
            user("The quarter labels on the trend chart overlap."),
            said("I tilted the quarter labels by 30 degrees and shortened them to Q1, Q2, Q3."),
            user("Good, do it like that from now on."),
        ],
        skills=["chart"],
    )
    found = entries(docs)
    assert len(found) == 1 and "30 degrees" in found[0][1], found
    assert found[0][0] == "skill:chart" and "overlap" not in found[0][1]


def test_kind2_zh_the_rule_is_the_changed_call() -> None:
    first = {"path": "out/周报.xlsx"}
    docs = remember(
        [
            user("把周报导出成 Excel。"),
            said("", call("c1", "excel_write", first)),
            result("c1", "excel_write", "wrote out/周报.xlsx"),
            user("日期那一列全成了数字，太难看了。"),
            said("", call("c2", "excel_write", {**first, "date_format": "yyyy-mm-dd"})),
            result("c2", "excel_write", "wrote out/周报.xlsx"),
            user("好，以后每次都这么弄。"),
        ],
        skills=["excel"],
    )
    found = entries(docs)
    assert len(found) == 1 and "date_format" in found[0][1], found
    assert found[0][0] == "skill:excel" and "难看" not in found[0][1]


# -- 3. scope from each skill's own metadata and from the interaction --------------------------


@pytest.mark.parametrize(
    ("text", "skills", "scope"),
    [
        (
            "Every churn forecast always carries a 90% interval band.",
            [{"name": "forecast", "description": "Time-series churn and demand forecasting."},
             {"name": "sql", "description": "Warehouse queries."}],
            "skill:forecast",
        ),
        (
            "排期图里以后节假日都用浅红色标出来。",
            [{"name": "gantt", "description": "项目甘特图：根据任务清单生成排期图（gantt_draw）"},
             {"name": "excel", "description": "读写 Excel 工作簿"}],
            "skill:gantt",
        ),
    ],
    ids=["en", "zh"],
)  # fmt: skip
def test_kind3_a_skill_outside_the_table_is_found_by_its_description(
    text: str, skills: Skills, scope: str
) -> None:
    assert [s for s, _ in entries(remember(text, skills=skills))] == [scope]


@pytest.mark.parametrize(
    ("ask", "tool_name", "rule"),
    [
        ("Draw the coverage map.", "zone_draw", "Outlines are always dashed."),
        ("把配送范围画出来。", "zone_draw", "边界线以后都用虚线。"),
    ],
    ids=["en", "zh"],
)
def test_kind3_a_follow_up_takes_the_scope_of_its_interaction(
    ask: str, tool_name: str, rule: str
) -> None:
    skills: Skills = [
        {"name": "delivery", "description": "Delivery radius maps (zone_draw)."},
        {"name": "excel", "description": "Reads and writes workbooks (excel_write)."},
    ]
    turns = [
        user(ask),
        said("", call("c1", tool_name, {"store": "all"})),
        result("c1", tool_name, "drawn"),
        user(rule),
    ]
    assert [s for s, _ in entries(remember(turns, skills=skills))] == ["skill:delivery"]


# -- 4. supersession by attribute, not by slot --------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "new", "old"),
    [
        ("When I say 'lapsed member' I mean nobody who bought in the last 120 days.",
         "Forty-five days is the lapsed-member window now.", "Forty-five", "120"),
        ("以后开票的收件人统一写“财务部王芳”。", "收件人现在改成“财务部李静”了，开票照这个写。",
         "李静", "王芳"),
    ],
    ids=["en", "zh"],
)  # fmt: skip
def test_kind4_a_changed_value_without_a_slot_replaces_the_old(
    first: str, second: str, new: str, old: str
) -> None:
    found = texts(remember(first, second))
    assert len(found) == 1 and new in found[0] and old not in found[0], found


# -- 5. Chinese markers, task-local reminders, repeated failures, deictics ----------------------


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("从现在起，周报里环比都用百分点表示。", "百分点"),
        ("每张工单最多派给 3 个人，这条以后一直有效。", "3 个人"),
        ("Still wrong - this column shows 98765 again. Totals always go in bold.", "bold"),
    ],
    ids=["zh-from-now-on", "zh-deictic-lends", "en-deictic-complaint"],
)
def test_kind5_markers_and_deictics_that_keep_a_rule(text: str, kept: str) -> None:
    found = texts(remember(text))
    assert len(found) == 1 and kept in found[0], found
    assert "98765" not in found[0] and "这条" not in found[0]


@pytest.mark.parametrize(
    "text",
    [
        "记得把上周的返工单也列进去。",
        "别忘了在第二页加上门店照片。",
        "Remember to add the store photos.",
    ],
    ids=["zh-记得", "zh-别忘了", "en"],
)
def test_kind5_a_reminder_for_this_task_is_not_a_memory(text: str) -> None:
    assert remember(text) == {}


# -- 6. a request to remember a secret leaves nothing behind -----------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "My BI password is Zq7!pass2024. You may always log in as me with it whenever you need.",
        "这是报销卡号 6217 0033 1122 4455，帮我存着，以后填表用得上。",
        "记住财务系统的密码 Kp9#2231xy，下次直接用，省得我再输。",
    ],
    ids=["en", "zh-card", "zh-password"],
)
def test_kind6_no_purpose_or_permission_clause_survives_a_secret(text: str) -> None:
    docs = remember(text)
    assert docs == {}, entries(docs)


# -- 7. tool lessons from transcripts; the cause an invalid-JSON error names ---------------------


def _json_lesson(error: str, old_shape: bool) -> list[str]:
    raw, fixed = '{"rows": [1, 2,]}', {"rows": [1, 2]}
    if old_shape:
        turns = [
            user("写进表格。"),
            {"role": "tool", "tool_name": "excel_write", "arguments": raw, "content": error,
             "is_error": True},
            {"role": "tool", "tool_name": "excel_write", "arguments": fixed, "content": "ok"},
        ]  # fmt: skip
    else:
        turns = [
            user("Write it to the sheet."),
            said("", call("c1", "excel_write", raw)),
            result("c1", "excel_write", error, error=True),
            said("", call("c2", "excel_write", fixed)),
            result("c2", "excel_write", "ok"),
        ]
    return texts(remember(turns, skills=["excel"]))


def test_kind7_en_a_transcript_lesson_names_the_json_cause() -> None:
    (lesson,) = _json_lesson("Invalid JSON: trailing comma before ']' (line 1 column 15)", False)
    assert "valid JSON (trailing comma before ']')" in lesson, lesson


def test_kind7_zh_a_lesson_names_the_json_cause() -> None:
    error = "Invalid JSON in tool arguments: unescaped newline inside a string at line 1 column 9"
    (lesson,) = _json_lesson(error, True)
    assert "合法 JSON（unescaped newline inside a string）" in lesson, lesson


def test_kind7_a_change_between_two_file_paths_is_no_lesson() -> None:
    turns = [
        user("Save the chart for the wiki."),
        said("", call("c1", "chart_render", {"type": "bar", "target": "/wiki/a.png"})),
        result("c1", "chart_render", "PermissionError: /wiki/a.png", error=True),
        said("", call("c2", "chart_render", {"type": "bar", "target": "out/wiki/a.png"})),
        result("c2", "chart_render", "rendered out/wiki/a.png"),
    ]
    assert remember(turns, skills=["chart"]) == {}


# -- 8. "Please remember:" and the injected heading ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ("Please remember: board packs never exceed twelve pages.", "remember"),
        ("请记住：季度汇报一律不放原始明细。", "记住"),
    ],
    ids=["en", "zh"],
)
def test_kind8_the_remember_marker_is_not_stored(text: str, marker: str) -> None:
    (found,) = texts(remember(text))
    assert marker not in found.casefold() and len(found) > 10, found


@pytest.mark.parametrize(
    ("text", "heading"),
    [
        ("From now on, dates as YYYY-MM-DD.", "# Personal memory"),
        ("以后日期都用 YYYY-MM-DD。", "# 个性化记忆"),
    ],
    ids=["en", "zh"],
)
def test_kind8_the_injected_heading_follows_the_users_language(text: str, heading: str) -> None:
    docs = remember(text)
    block = render_injection(docs.get("user"), [])
    assert block.splitlines()[0] == heading
    assert "YYYY-MM-DD" in render_document(docs["user"])


def test_kind2_zh_an_approval_for_this_time_only_is_not_general() -> None:
    docs = remember(
        [
            user("表头颜色太深了。"),
            said("我把表头底色从深蓝改成了浅灰色，字体也调成了黑色加粗。"),
            user("行，这次就先这样吧。"),
        ]
    )
    assert docs == {}
    signals = detect_signals(Interaction.model_validate({"turns": [user("Every time.")]}))
    assert [s for s in signals if s.kind is not SignalKind.STATEMENT] == []
