"""Memory files: round trip, user edits, errors, injection and compaction."""

from datetime import UTC, datetime

import pytest

from agent_core.errors import SchemaError
from agent_core.memory import (
    INJECTION_HEADING,
    INJECTION_HEADINGS,
    INJECTION_NOTE,
    INJECTION_NOTES,
    MemoryDocument,
    MemoryEntry,
    compact,
    new_document,
    parse_document,
    render_document,
    render_injection,
)
from agent_core.memory.document import MAX_FRONTMATTER_DEPTH


def _doc(scope: str, *texts: str, budget: int = 3000) -> MemoryDocument:
    doc = new_document(scope).model_copy(update={"char_budget": budget})
    for i, text in enumerate(texts, 1):
        doc.entries.append(MemoryEntry(id=f"u{i}", text=text))
    return doc


def test_round_trip_keeps_everything() -> None:
    doc = _doc("skill:excel", "冻结首行", "sheet 名不超过 31 字符")
    doc.entries[0].slot = "freeze=on"
    doc.entries[0].before = ["## 手写说明", ""]
    doc.updated_at = datetime(2026, 1, 5, 10, tzinfo=UTC)
    text = render_document(doc)
    assert text.startswith("---\nscope: skill:excel\nskill: excel\n")
    assert "<!--" not in text  # machine fields live in the frontmatter, not on the user's lines
    back = parse_document(text, scope="user")
    assert [(e.id, e.text, e.slot, e.before) for e in back.entries] == [
        (e.id, e.text, e.slot, e.before) for e in doc.entries
    ]
    assert render_document(back) == text


USER_FILE = """---
scope: user
---
# My notes
Keep these short.

* Dates as YYYY-MM-DD.
-   Amounts in 万元
    (two decimals)

## Charts
- no pie charts{TRAILING_SPACES}
closing remark
""".format(TRAILING_SPACES="   ")


def _body(text: str) -> str:
    return text.split("\n---\n", 1)[1]


def test_user_edits_keep_their_exact_text_through_a_rewrite() -> None:
    doc = parse_document(USER_FILE, scope="user")
    assert [e.text for e in doc.entries] == [
        "Dates as YYYY-MM-DD.", "Amounts in 万元 (two decimals)", "no pie charts",
    ]  # fmt: skip
    doc.add_entry(MemoryEntry(id=doc.next_entry_id(), text="Reply in English"))
    out = render_document(doc)
    assert _body(out) == _body(USER_FILE).replace("closing remark\n", "closing remark\n").replace(
        "- no pie charts   \n", "- no pie charts   \n- Reply in English\n"
    )
    again = parse_document(out, scope="user")
    assert [e.id for e in again.entries] == [e.id for e in doc.entries]


def test_an_entry_edited_in_place_keeps_its_id_and_reads_its_slot_anew() -> None:
    first = parse_document("- Dates as YYYY-MM-DD\n- Amounts in EUR\n", scope="user")
    stored = render_document(first)
    edited = stored.replace("Dates as YYYY-MM-DD", "Dates as DD/MM/YYYY")
    doc = parse_document(edited, scope="user")
    assert [e.id for e in doc.entries] == [e.id for e in first.entries]
    assert doc.entries[0].slot == "date_format=dmy_slash"


def test_the_earlier_format_with_comments_is_read_and_written_without_them() -> None:
    doc = parse_document(
        "- 日期用 ISO <!-- id:u7 slot:date_format=iso -->\n- 第二条\n", scope="user"
    )
    assert [(e.id, e.slot) for e in doc.entries][0] == ("u7", "date_format=iso")
    out = render_document(doc)
    assert "<!--" not in out and "- 日期用 ISO\n" in out and "u7: {h:" in out


def test_user_edit_without_comments_gets_ids_and_continuations() -> None:
    doc = parse_document(
        "- 日期用 YYYY-MM-DD\n- 金额用万元\n  保留两位小数\n* 第三条 <!-- id:u1 -->\n", scope="user"
    )
    assert [e.text for e in doc.entries] == [
        "日期用 YYYY-MM-DD",
        "金额用万元 保留两位小数",
        "第三条",
    ]
    assert len({e.id for e in doc.entries}) == 3
    assert doc.scope == "user" and doc.char_budget == 3000


@pytest.mark.parametrize(
    "text",
    [
        "---\na: &x [1, 2]\nb: *x\n---\n- a\n",  # aliases expand exponentially: refused
        "---\n" + "k: v\n" * 5000 + "---\n- a\n",  # frontmatter over its limit
        "- " + "x" * 70_000 + "\n",  # file over its limit
        "---\na: " + "[" * 5000 + "\n---\n- a\n",  # flow nesting: PyYAML would recurse
        "---\n" + "- " * 5000 + "x\n---\n- a\n",  # block nesting likewise
        "---\n" + "\n".join(" " * i + f"k{i}:" for i in range(40)) + "\n---\n- a\n",
    ],
)
def test_frontmatter_aliases_and_oversized_files_are_refused(text: str) -> None:
    with pytest.raises(SchemaError):
        parse_document(text, scope="user")


@pytest.mark.parametrize(
    "text", ["---\n[unclosed\n---\n- a\n", "---\n- a list\n---\n", "---\nchar_budget: -1\n---\n"]
)
def test_bad_frontmatter_is_a_schema_error(text: str) -> None:
    with pytest.raises(SchemaError):
        parse_document(text, scope="user")


def test_injection_has_heading_note_user_and_enabled_skills_only() -> None:
    doc = _doc("user", "日期用 YYYY-MM-DD")
    doc.entries[0].slot = "date_format=iso"
    out = render_injection(doc, [_doc("skill:chart", "不要饼图")])
    # A Chinese-speaking user's memory is introduced in Chinese.
    assert out.splitlines()[:2] == [INJECTION_HEADINGS["zh"], INJECTION_NOTES["zh"]]
    assert "- 日期用 YYYY-MM-DD" in out and "## 技能：chart" in out and "- 不要饼图" in out
    assert "<!--" not in out and "slot" not in out
    assert render_injection(new_document("user"), []) == ""


def test_compaction_merges_then_shortens_then_reports_evictions() -> None:
    doc = _doc(
        "user",
        "图表不要 3D",
        "图表不要 3D 效果，也不要阴影",
        "日期用 ISO，因为系统会出错",
        "x" * 30,
        budget=40,
    )
    report = compact(doc)
    assert ("u1", "u2") in report.merged
    assert "u3" in report.shortened
    assert report.document.chars_used() <= 40
    kept = {e.id for e in report.document.entries}
    evicted = {e.id for e in report.evicted}
    assert kept | evicted | {"u1"} == {"u1", "u2", "u3", "u4"} and not kept & evicted
    assert doc.chars_used() > 40  # the input is not mutated


def test_compaction_under_budget_changes_nothing() -> None:
    doc = _doc("user", "a b c")
    report = compact(doc)
    assert not report.changed and report.document == doc


def test_injection_heading_follows_the_users_language_english_by_default() -> None:
    english = render_injection(
        _doc("user", "Dates as YYYY-MM-DD"), [_doc("skill:chart", "No pies")]
    )
    assert english.splitlines()[:2] == [INJECTION_HEADING, INJECTION_NOTE]
    assert "## User preferences" in english and "## Skill: chart" in english
    # Only skill memory, in Chinese: still the user's language.
    assert render_injection(None, [_doc("skill:chart", "不要饼图")]).startswith("# 个性化记忆")
    # The account's setting (user.md frontmatter) and an explicit language win.
    doc = _doc("user", "日期用 YYYY-MM-DD")
    doc.extra["language"] = "en"
    assert render_injection(doc, []).startswith(INJECTION_HEADING)
    assert render_injection(_doc("user", "Dates as ISO"), [], "zh").startswith("# 个性化记忆")
    # A reply-language preference says which language the user wants.
    doc = _doc("user", "Reply language: zh")
    doc.entries[0].slot = "reply_language=zh"
    assert render_injection(doc, []).startswith("# 个性化记忆")


def test_frontmatter_may_nest_up_to_its_limit_and_no_further() -> None:
    """Counted in nodes from the root mapping (level 1) down to the innermost scalar: ``a: [[x]]``
    puts ``x`` at level 4. The limit is on what is read, before anything is composed."""

    def nested(lists: int) -> str:
        return "---\na: " + "[" * lists + "x" + "]" * lists + "\n---\n- a\n"

    deepest = MAX_FRONTMATTER_DEPTH - 2  # the lists that keep ``x`` at the limit
    assert parse_document(nested(deepest), scope="user").extra["a"] is not None
    with pytest.raises(SchemaError, match="nests deeper"):
        parse_document(nested(deepest + 1), scope="user")
    with pytest.raises(SchemaError, match="aliases"):
        parse_document("---\na: &x 1\n---\n- a\n", scope="user")  # an anchor alone is refused
