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
SCOPE_PATTERN = r"^(user|skill:[A-Za-z0-9_.\-]+)$"

# Words that tie a statement to a skill's artefact or tool. A skill missing here is matched by
# its name only. Generic words ("表", "table") are left out on purpose: they fit every skill.
DEFAULT_SKILL_KEYWORDS: Mapping[str, tuple[str, ...]] = {
    "excel": ("excel", "xlsx", "sheet", "工作表", "单元格", "cell", "冻结", "列宽", "表头"),
    "sql": ("sql", "查询", "query", "字段", "column", "hive", "mysql", "snowflake", "postgres",
            "warehouse", "数仓", "数据仓库", "spark", "select", "join", "订单表"),
    "chart": ("chart", "图表", "饼图", "柱状图", "折线图", "条形图", "环形图", "pie", "plot", "配色",
              "palette", "axis", "坐标轴", "3d", "数据标签", "画图"),
    "report": ("report", "报表", "报告", "周报", "月报", "summary", "结论", "pdf", "methodology",
               "章节", "section", "导出", "export"),
    "ppt": ("ppt", "slide", "幻灯片", "deck", "演示"),
}  # fmt: skip

# Preferences that hold across every output; they stay in ``user`` unless a skill is named.
CROSS_CUTTING_SLOTS = frozenset(
    {"date_format", "decimals", "currency", "amount_unit", "thousands_separator",
     "reply_language", "measure_units"}
)  # fmt: skip


def skill_scope(name: str) -> str:
    """The scope string of a skill."""
    return f"skill:{name}"


def scope_skill(scope: str) -> str | None:
    """The skill name of a ``skill:<name>`` scope, ``None`` for ``user``."""
    return scope.split(":", 1)[1] if scope.startswith("skill:") else None


def _hits(text: str, words: Iterable[str]) -> int:
    low = text.casefold()
    return sum(1 for w in words if re.search(rf"(?<![a-z]){re.escape(w)}", low))


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
    named = [s for s in skills if _hits(text, [s.casefold()])]
    if named:
        return skill_scope(named[0])
    if set(slot_keys) & CROSS_CUTTING_SLOTS:
        return USER_SCOPE
    scores = {s: _hits(text, keywords.get(s, ())) for s in skills}
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
