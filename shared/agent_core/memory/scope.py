"""Memory scopes (``user`` or ``skill:<name>``) and the rule that picks one for a statement."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "CROSS_CUTTING_SLOTS",
    "DEFAULT_SKILL_KEYWORDS",
    "SCOPE_PATTERN",
    "USER_SCOPE",
    "resolve_scope",
    "scope_skill",
    "skill_scope",
    "tool_scope",
]

USER_SCOPE = "user"
# Skill names are ASCII in a home's skill folder, but a transcript may name a skill in Chinese
# ("地图"): CJK letters are allowed too (they make a valid file name on every platform).
SCOPE_PATTERN = "^(user|skill:[A-Za-z0-9_.\\-\u3400-\u4dbf\u4e00-\u9fff]+)$"

# Words that tie a statement to a skill's artefact or tool. A skill missing here is matched by
# its name only. Generic words ("表", "table") are left out on purpose: they fit every skill.
DEFAULT_SKILL_KEYWORDS: Mapping[str, tuple[str, ...]] = {
    "excel": ("excel", "xlsx", "sheet", "workbook", "工作表", "工作簿", "单元格", "cell", "冻结", "列宽",
              "表头", "header row", "autofit", "merge", "合并", "透视", "pivot", "freeze"),
    "sql": ("sql", "查询", "query", "queries", "字段", "column", "hive", "mysql", "snowflake", "postgres",
            "bigquery", "warehouse", "数仓", "数据仓库", "spark", "select", "join", "订单表", "只读库",
            "schema", "table is", "表是", "表叫"),
    "chart": ("chart", "图表", "饼图", "柱状图", "折线图", "条形图", "环形图", "pie", "plot", "配色",
              "palette", "axis", "axes", "坐标轴", "3d", "数据标签", "画图", "legend", "图例", "bar", "funnel"),
    "report": ("report", "报表", "报告", "周报", "月报", "日报", "summary", "结论", "pdf", "methodology",
               "章节", "section", "导出", "export", "takeaway", "commentary", "appendix", "附录",
               "headings", "标题", "next steps", "board pack", "executive"),
    "ppt": ("ppt", "slide", "幻灯片", "deck", "演示"),
    "dashboard": ("dashboard", "看板", "仪表盘", "指标卡", "kpi card", "tile", "widget", "刷新"),
    "pandas": ("pandas", "dataframe", "data frame", "df", "python", "notebook", "datetime", "dtype",
               "groupby", "缺失值", "nan"),
    "email": ("email", "e-mail", "邮件", "抄送", "收件人", "subject line", "cc", "mail"),
    "word": ("word", "docx", "文档", "段落", "paragraph"),
}  # fmt: skip

# Preferences that hold across every output; they stay in ``user`` unless a skill is named.
CROSS_CUTTING_SLOTS = frozenset(
    {"date_format", "decimals", "currency", "amount_unit", "thousands_separator",
     "reply_language", "measure_units", "week_start", "timezone", "fiscal_year_start",
     "negative_format"}
)  # fmt: skip


def skill_scope(name: str) -> str:
    """The scope string of a skill."""
    return f"skill:{name}"


def scope_skill(scope: str) -> str | None:
    """The skill name of a ``skill:<name>`` scope, ``None`` for ``user``."""
    return scope.split(":", 1)[1] if scope.startswith("skill:") else None


def _hits(text: str, words: Iterable[str]) -> int:
    low = text.casefold()
    return sum(1 for w in words if re.search(rf"(?<![a-z]){re.escape(w)}(?:e?s)?(?![a-z])", low))


def _named(text: str, skill: str) -> bool:
    """The skill's name used as a noun ("in the report", "Excel 里"), not as a verb ("we report")."""
    low = text.casefold()
    for word in _name_words(skill)[:2]:
        for m in re.finditer(rf"(?<![a-z]){re.escape(word)}(?:e?s)?(?![a-z])", low):
            if not re.search(
                r"(?:\b(?:we|i|you|they|to|will|should|must|please)\s)$", low[: m.start()]
            ):
                return True
    return False


def _name_words(skill: str) -> list[str]:
    """A skill's name and the parts of a compound name ("data_cleaning" → data cleaning)."""
    parts = [p for p in re.split(r"[_.\-]+", skill.casefold()) if len(p) > 2]
    return [skill.casefold(), " ".join(parts), *parts] if len(parts) > 1 else [skill.casefold()]


def resolve_scope(
    text: str,
    skills: Sequence[str],
    *,
    slot_keys: Iterable[str] = (),
    keywords: Mapping[str, Sequence[str]] = DEFAULT_SKILL_KEYWORDS,
) -> str:
    """``skill:<name>`` of the enabled skill the statement is about, else ``user``.

    A skill named literally wins; a cross-cutting preference (date, decimals, currency, …) stays
    ``user`` unless a skill is named; otherwise the enabled skill with most keyword hits wins.
    """
    named = [s for s in skills if _named(text, s)]
    if named:
        return skill_scope(named[0])
    if set(slot_keys) & CROSS_CUTTING_SLOTS:
        return USER_SCOPE
    scores = {s: _hits(text, [*keywords.get(s, ()), *_name_words(s)[2:]]) for s in skills}
    best = max(scores.values(), default=0)
    if best == 0:
        return USER_SCOPE
    return skill_scope(next(s for s in skills if scores[s] == best))


def tool_scope(
    tool_name: str,
    skills: Sequence[str],
    keywords: Mapping[str, Sequence[str]] = DEFAULT_SKILL_KEYWORDS,
) -> str:
    """The scope of a lesson about ``tool_name``: the enabled skill it belongs to, else ``user``."""
    low = tool_name.casefold()
    for skill in skills:
        if skill.casefold() in low or any(w in low for w in keywords.get(skill, ()) if len(w) > 3):
            return skill_scope(skill)
    return USER_SCOPE
