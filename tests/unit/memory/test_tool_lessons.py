"""Tool experience: only a changed call that then succeeded teaches something."""

from typing import Any

from agent_core.memory import Interaction, SignalKind, Turn, TurnRole, detect_signals
from agent_core.memory.tool_lessons import argument_delta


def _call(
    args: dict[str, Any] | str, result: str, error: bool = False, tool: str = "excel_write"
) -> Turn:
    return Turn(role=TurnRole.TOOL, tool_name=tool, arguments=args, content=result, is_error=error)


def _lessons(*turns: Turn, first: str = "导出 Excel") -> list[str]:
    ix = Interaction(turns=[Turn(role=TurnRole.USER, content=first), *turns], skills=["excel"])
    return [s.text for s in detect_signals(ix) if s.kind is SignalKind.TOOL_LESSON]


def test_changed_call_that_succeeds_is_a_lesson_in_the_skill_scope() -> None:
    ix = Interaction(
        turns=[
            Turn(role=TurnRole.USER, content="导出 Excel"),
            _call({"sheet_name": "x" * 40}, "sheet name must be at most 31 characters", error=True),
            _call({"sheet_name": "汇总"}, "ok"),
        ],
        skills=["excel"],
    )
    (lesson,) = [s for s in detect_signals(ix) if s.kind is SignalKind.TOOL_LESSON]
    assert lesson.scope == "skill:excel"
    assert "31" in lesson.text and "sheet_name" in lesson.text and lesson.language == "zh"


def test_identical_retry_path_only_change_and_unfinished_chain_are_not_lessons() -> None:
    same = {"sql": "select 1"}
    assert _lessons(_call(same, "timeout", error=True), _call(same, "ok")) == []
    assert (
        _lessons(_call({"path": "a.xlsx"}, "locked", error=True), _call({"path": "b.xlsx"}, "ok"))
        == []
    )
    assert (
        _lessons(_call({"n": 1}, "bad n", error=True), _call({"n": 2}, "bad n again", error=True))
        == []
    )


def test_fix_supplied_by_the_user_is_not_a_lesson() -> None:
    ix = Interaction(
        turns=[
            Turn(role=TurnRole.USER, content="读一下文件"),
            _call({"sheet": "A"}, "no such sheet", error=True, tool="excel_read"),
            Turn(role=TurnRole.USER, content="用 B 表"),
            _call({"sheet": "B"}, "ok", tool="excel_read"),
        ],
        skills=["excel"],
    )
    assert [s for s in detect_signals(ix) if s.kind is SignalKind.TOOL_LESSON] == []


def test_invalid_json_arguments_then_valid_is_a_lesson() -> None:
    (lesson,) = _lessons(
        _call('{"rows": [["a\nb"]]}', "Invalid JSON: control character", error=True),
        _call({"rows": []}, "ok"),
    )
    assert "JSON" in lesson


def test_chain_yields_one_lesson_per_fixed_error_and_scrubs_secrets() -> None:
    lessons = _lessons(
        _call(
            {"sql": "SELECT TOP 10 a FROM t"}, "syntax error near 10", error=True, tool="sql_query"
        ),
        _call(
            {"sql": "SELECT a FROM t LIMIT 10"},
            "password=hunter2xyz rejected",
            error=True,
            tool="sql_query",
        ),
        _call({"sql": "SELECT a2 FROM t LIMIT 10"}, "ok", tool="sql_query"),
    )
    assert len(lessons) == 2
    assert "TOP" in lessons[0] and "LIMIT" in lessons[0]
    assert all("hunter2xyz" not in t for t in lessons)


def test_argument_delta_describes_added_removed_and_long_changes() -> None:
    delta = argument_delta(
        {"a": 1, "b": "x", "q": "select " + "c, " * 20 + "d from t"},
        {"a": 2, "c": 3, "q": "select " + "c, " * 20 + "e from t"},
        "en",
    )
    assert delta["a"] == "1 → 2" and delta["b"] == "removed" and delta["c"] == "added 3"
    assert '"d" → "e"' in delta["q"]
