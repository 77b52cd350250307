"""Memory scopes (``user`` or ``skill:<name>``) and the rule that picks one for a statement."""

from __future__ import annotations

import functools
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
    "skill_terms",
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


def _hits(text: str, words: Sequence[str]) -> int:
    """How many of ``words`` occur in ``text`` as words (a plural allowed)."""
    low = text.casefold()
    if not words or _any_word(tuple(words)).search(low) is None:
        return 0  # most statements name none of a skill's words: one search says so
    return sum(1 for w in words if re.search(rf"(?<![a-z]){re.escape(w)}(?:e?s)?(?![a-z])", low))


@functools.lru_cache(maxsize=256)
def _any_word(words: tuple[str, ...]) -> re.Pattern[str]:
    """A pattern that matches where any one of ``words`` matches as :func:`_hits` counts it
    (an alternation backtracks through every word at every place: none missed)."""
    alternation = "|".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![a-z])(?:{alternation})(?:e?s)?(?![a-z])")


def _named(text: str, skill: str) -> bool:
    """The skill's name used as a noun ("in the report", "Excel 里"), not as a verb ("we report")."""
    low = text.casefold()
    for word in _name_words(skill)[:2]:
        if word not in low:
            continue  # (the pattern below needs the word itself: a substring test says no first)
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


# Words of a skill's description that say nothing about what it is for ("Builds … from …",
# "读写 … 生成"): every skill's description has some, so they would tie any statement to any skill.
_GENERIC_WORDS = frozenset(
    [
        "a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "from", "into", "with",
        "by", "as", "via", "per", "each", "its", "it", "their", "your", "this", "that", "these",
        "those", "one", "all", "any", "more", "most", "only", "also", "can", "will", "using", "use",
        "uses", "used", "based", "build", "builds", "built", "make", "makes", "made", "create",
        "creates", "run", "runs", "read", "reads", "write", "writes", "render", "renders", "draw",
        "draws", "turn", "turns", "get", "gets", "give", "gives", "generate", "generates", "produce",
        "produces", "send", "sends", "data", "file", "files", "value", "values", "item", "items",
        "thing", "things", "tool", "tools", "skill", "skills", "output", "outputs", "input", "inputs",
        "result", "results", "new", "table", "tables", "e", "g", "etc",
    ]
)  # fmt: skip
_GENERIC_BIGRAMS = frozenset(
    ["数据", "生成", "根据", "按照", "进行", "可以", "支持", "用于", "以及", "文件", "结果", "输出",
     "读写", "统一", "格式", "一个", "和格", "和联", "分析", "成果", "工具", "技能", "自动", "帮你"]
)  # fmt: skip
_TOOL_NAME = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z][A-Za-z0-9]{0,40}(?:_[A-Za-z0-9]{1,40}){1,8}")


# The syntax of a language, as it is quoted in a statement about the code the agent writes.
_CODE_LANGUAGES = (
    ("sql", re.compile(r"\bSELECT\s{1,3}(?:\*|DISTINCT\b)|\b(?:GROUP|ORDER) BY\b|\bLEFT JOIN\b|"
                       r"\bINSERT INTO\b|\bDELETE FROM\b")),
    # "import pandas 了" / "import polars." is code; "import the data" is English
    ("python", re.compile(r"\bimport [a-z_][a-z0-9_]{1,30}(?=\s{0,3}(?:[^\x00-\x7f]|[,.;]|$))|\bdef [a-z_]{1,30}\(|\bprint\(|"
                          r"\bpip install\b|\.py\b")),
)  # fmt: skip


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@functools.lru_cache(maxsize=256)  # a statement is tested against every skill, each time
def skill_terms(name: str, description: str = "") -> tuple[frozenset[str], frozenset[str]]:
    """(name terms, description terms) that tie a statement to a skill, in both languages.

    Name terms: the name and the parts of a compound name ("ppt_builder" → ppt, builder, a
    Chinese name as it is). Description terms: its content words (stemmed, generic verbs and
    nouns left out) and the character bigrams of its Chinese runs; the tool names it lists in
    parentheses are kept whole, so a lesson about one of them finds its skill.
    """
    low = name.casefold()
    parts = [p for p in re.split(r"[_.\-\s]+", low) if len(p) >= 2]
    name_terms = {low, *(p for p in parts if len(p) >= 3 or re.search(r"[\u4e00-\u9fff]", p))}
    desc = description.casefold()[:600]
    terms: set[str] = {m.group(0) for m in _TOOL_NAME.finditer(desc)}
    rest = _TOOL_NAME.sub(" ", desc)
    for word in re.findall(r"[a-z][a-z0-9]{2,}", rest):
        if word not in _GENERIC_WORDS and _stem(word) not in _GENERIC_WORDS:
            terms.add(_stem(word))
    for run in re.findall(r"[\u4e00-\u9fff]+", rest):
        terms.update(
            run[i : i + 2] for i in range(len(run) - 1) if run[i : i + 2] not in _GENERIC_BIGRAMS
        )
    return frozenset(name_terms), frozenset(terms - name_terms)


def _words(text: str) -> tuple[str, frozenset[str]]:
    """``text`` casefolded and its stemmed words, as :func:`_term_hits` matches terms in them."""
    low = text.casefold()
    return low, frozenset(_stem(w) for w in re.findall(r"[a-z][a-z0-9_]{1,}", low))


def _term_hits(text: tuple[str, frozenset[str]], terms: Iterable[str]) -> int:
    """How many of ``terms`` occur in ``text`` (as :func:`_words` gives it): a Chinese term or a
    tool name anywhere in it, another term as one of its words."""
    low, words = text
    return sum(term in low if _anywhere(term) else term in words for term in terms)


@functools.lru_cache(maxsize=4096)
def _anywhere(term: str) -> bool:
    return "_" in term or re.search(r"[\u4e00-\u9fff]", term) is not None


def resolve_scope(
    text: str,
    skills: Sequence[str],
    *,
    slot_keys: Iterable[str] = (),
    keywords: Mapping[str, Sequence[str]] = DEFAULT_SKILL_KEYWORDS,
    descriptions: Mapping[str, str] | None = None,
) -> str:
    """``skill:<name>`` of the enabled skill the statement is about, else ``user``.

    A skill named literally wins; a cross-cutting preference (date, decimals, currency, …) stays
    ``user`` unless a skill is named; otherwise the enabled skill with most hits wins: words of
    the built-in table, parts of its name (twice) and words of its own description.
    """
    found = skill_of(
        text, skills, slot_keys=slot_keys, keywords=keywords, descriptions=descriptions
    )
    return USER_SCOPE if found is None else skill_scope(found)


def skill_of(
    text: str,
    skills: Sequence[str],
    *,
    slot_keys: Iterable[str] = (),
    keywords: Mapping[str, Sequence[str]] = DEFAULT_SKILL_KEYWORDS,
    descriptions: Mapping[str, str] | None = None,
) -> str | None:
    """The enabled skill ``text`` is about (see :func:`resolve_scope`), ``None`` when none is.

    Code quoted in the text names its language ("SELECT *" is SQL, "import polars" Python), so a
    skill described by that language is found by a statement that only quotes its code."""
    named = [s for s in skills if _named(text, s)]
    text = text + "".join(f" {lang}" for lang, p in _CODE_LANGUAGES if p.search(text))
    if named:
        return named[0]
    # A cross-cutting preference (dates, decimals, …) belongs to a skill only when the skill's
    # own words say so ("发票金额保留两位小数" with an invoice skill), never by the table.
    cross = bool(set(slot_keys) & CROSS_CUTTING_SLOTS)
    descriptions = descriptions or {}
    scores: dict[str, int] = {}
    words = _words(text)
    for s in skills:
        name_terms, desc_terms = skill_terms(s, descriptions.get(s, ""))
        table = 0 if cross else _hits(text, [*keywords.get(s, ()), *_name_words(s)[2:]])
        extra = _term_hits(words, name_terms - {s.casefold()}) if len(name_terms) > 1 else 0
        if re.search(r"[\u4e00-\u9fff]", s) and s in text:
            extra += 2
        # The skill's own words count twice the built-in table's: they say what it is for.
        scores[s] = table + 2 * extra + 2 * _term_hits(words, desc_terms)
    best = max(scores.values(), default=0)
    if best == 0:
        return None
    return next(s for s in skills if scores[s] == best)


def tool_scope(
    tool_name: str,
    skills: Sequence[str],
    keywords: Mapping[str, Sequence[str]] = DEFAULT_SKILL_KEYWORDS,
    descriptions: Mapping[str, str] | None = None,
    owners: Mapping[str, str] | None = None,
) -> str:
    """The scope of a lesson about ``tool_name``: the enabled skill it belongs to, else ``user``.

    The skill that owns the tool (``owners``: tool name → skill, as the run-worker reports it)
    wins; then a skill whose description lists the tool; then one whose name is in the tool's
    name; then one whose table words (or name parts) are.
    """
    owner = (owners or {}).get(tool_name)
    if owner is not None and owner in skills:
        return skill_scope(owner)
    low = tool_name.casefold()
    descriptions = descriptions or {}
    for skill in skills:
        if low and re.search(rf"(?<![a-z0-9_]){re.escape(low)}(?![a-z0-9_])",
                             descriptions.get(skill, "").casefold()):  # fmt: skip
            return skill_scope(skill)
    for skill in skills:
        if skill.casefold() in low:
            return skill_scope(skill)
    for skill in skills:
        words = [*keywords.get(skill, ()), *_name_words(skill)[2:]]
        if any(w in low for w in words if len(w) > 3):
            return skill_scope(skill)
    return USER_SCOPE
