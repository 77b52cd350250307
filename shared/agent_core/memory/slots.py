"""Slot keys for common preferences, so a newer value replaces an older one without an LLM.

A slot is a (key, value) pair read from one clause: ``("date_format", "iso")``,
``("currency", "EUR")``, ``("chart_ban:pie", "off")``. Two entries of one scope with the same key
describe the same preference; when their values differ, the newer entry replaces the older.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._text import Language

__all__ = ["SlotMatch", "detect_slots", "slot_template"]


@dataclass(frozen=True, order=True)
class SlotMatch:
    """One preference found in a clause: ``key`` names the preference, ``value`` its setting."""

    start: int
    key: str
    value: str


_NEG = r"(?:不要|别|不用|不准|禁止|不能|avoid|never|no|not|don't|do not|without|而不是|不是)"
_I = re.IGNORECASE

_DATE_FORMATS: tuple[tuple[str, str], ...] = (
    (r"yyyy-mm-dd|\bISO(?:[ -]?8601)?\b", "iso"),
    (r"yyyy/mm/dd", "ymd_slash"),
    (r"dd/mm/yyyy", "dmy_slash"),
    (r"mm/dd/yyyy", "mdy_slash"),
    (r"yyyy\.mm\.dd", "ymd_dot"),
    (r"yyyy年m{1,2}月d{1,2}日", "zh_ymd"),
)
# Literal example dates count only next to a word saying they are a format.
_DATE_EXAMPLES: tuple[tuple[str, str], ...] = (
    (r"\b\d{4}-\d{2}-\d{2}\b", "iso"),
    (r"\b\d{4}/\d{1,2}/\d{1,2}\b", "ymd_slash"),
    (r"\d{4}年\d{1,2}月\d{1,2}日", "zh_ymd"),
)
_DATE_CONTEXT = re.compile(r"日期|格式|date|format|这种|样式", _I)

_NUM = {"零": "0", "一": "1", "两": "2", "二": "2", "三": "3", "四": "4", "zero": "0", "no": "0",
        "one": "1", "two": "2", "three": "3", "four": "4"}  # fmt: skip
_DECIMALS = re.compile(
    r"([零一两二三四\d])\s*位小数|\b(zero|no|one|two|three|four|\d)\s+decimal|整数|whole numbers",
    _I,
)
_PERCENT = re.compile(r"百分比|百分数|percent|percentage|%", _I)

_CURRENCIES = {"usd": "USD", "美元": "USD", "eur": "EUR", "欧元": "EUR", "cny": "CNY",
               "rmb": "CNY", "人民币": "CNY", "gbp": "GBP", "英镑": "GBP", "jpy": "JPY",
               "日元": "JPY", "hkd": "HKD", "港币": "HKD"}  # fmt: skip
_CURRENCY = re.compile(
    r"(?<![a-z])(usd|eur|cny|rmb|gbp|jpy|hkd)(?![a-z])|美元|欧元|人民币|英镑|日元|港币", _I
)
_UNIT = re.compile(
    r"(万元|千元|百万元|亿元)|(?:用|以|单位[是为:：]?)(元)(?![素旦])|\bin (thousands|millions|billions)\b",
    _I,
)
_THOUSANDS = re.compile(r"千分位|thousands?[ -]separators?", _I)
_LANG_WORD = r"(英文|英语|中文|汉语|english|chinese)"
_LANG_VERB = r"(?:回复|回答|答复|reply|replies|answer|respond|responses|write to me)"
_LANGUAGE = re.compile(
    rf"{_LANG_VERB}[^，,。.]{{0,12}}?{_LANG_WORD}|{_LANG_WORD}\s*{_LANG_VERB}", _I
)
_CHARTS = {"柱状图": "bar", "条形图": "bar", "bar": "bar", "折线图": "line", "line": "line",
           "饼图": "pie", "pie": "pie", "环形图": "donut", "donut": "donut", "面积图": "area",
           "area": "area", "散点图": "scatter", "scatter": "scatter"}  # fmt: skip
_CHART = re.compile(
    r"(柱状图|条形图|折线图|饼图|环形图|面积图|散点图|\b(?:bar|line|pie|donut|area|scatter)\s*charts?)",
    _I,
)
_CHART_USE = re.compile(
    r"(?:默认|都|一律|改用|用|使用|换成|改成|use|prefer|switch to|default to)\s*$", _I
)
_CHART_3D = re.compile(rf"{_NEG}[^，,。.]{{0,8}}(?:3d|三维|立体)", _I)
_COLOR = re.compile(
    r"(?:配色|主色|主题色|颜色|colou?r scheme|palette|colou?rs?)[^，,。.]{0,12}?(#[0-9a-f]{6}|#[0-9a-f]{3})\b",
    _I,
)
_IMAGE = re.compile(r"(?:导出|输出|保存|存成|export|save)[^，,。.]{0,16}?\b(png|svg|jpe?g)\b", _I)
_EXPORT = re.compile(
    r"(?:导出|输出|发|保存|存成|export|save|send|deliver)[^，,。.]{0,16}?\b(pdf|docx?|word|xlsx|excel|csv|pptx?|markdown)\b",
    _I,
)
_SUMMARY = re.compile(
    r"(结论|摘要|总结|summary|conclusions?)[^，,。.]{0,20}?(最前|前面|开头|第一|top|beginning|start|最后|末尾|结尾|end|bottom)",
    _I,
)
_DIALECTS = ("hive", "mysql", "postgresql", "postgres", "snowflake", "bigquery", "clickhouse",
             "spark sql", "presto", "trino", "oracle", "sql server", "t-sql", "sqlite")  # fmt: skip
_DIALECT = re.compile(
    r"(?<![a-z])(" + "|".join(re.escape(d) for d in _DIALECTS) + r")(?![a-z])", _I
)
_MEASURE = re.compile(r"公制|英制|\bmetric\b|\bimperial\b", _I)


def _negated(clause: str, start: int) -> bool:
    return re.search(rf"{_NEG}[^，,。.]{{0,10}}$", clause[:start], _I) is not None


def _dates(clause: str) -> list[SlotMatch]:
    for pattern, value in _DATE_FORMATS:
        if m := re.search(pattern, clause, _I):
            return [SlotMatch(m.start(), "date_format", value)]
    if _DATE_CONTEXT.search(clause):
        for pattern, value in _DATE_EXAMPLES:
            if m := re.search(pattern, clause):
                return [SlotMatch(m.start(), "date_format", value)]
    return []


def _numbers(clause: str) -> list[SlotMatch]:
    found: list[SlotMatch] = []
    if m := _DECIMALS.search(clause):
        raw = (m.group(1) or m.group(2) or "0").lower()
        key = "percent_decimals" if _PERCENT.search(clause) else "decimals"
        found.append(SlotMatch(m.start(), key, _NUM.get(raw, raw)))
    if m := _CURRENCY.search(clause):
        found.append(SlotMatch(m.start(), "currency", _CURRENCIES[m.group(0).lower()]))
    if m := _UNIT.search(clause):
        found.append(SlotMatch(m.start(), "amount_unit", next(g for g in m.groups() if g).lower()))
    if m := _THOUSANDS.search(clause):
        found.append(
            SlotMatch(
                m.start(), "thousands_separator", "off" if _negated(clause, m.start()) else "on"
            )
        )
    if m := _MEASURE.search(clause):
        metric = m.group(0).lower() in ("公制", "metric")
        found.append(SlotMatch(m.start(), "measure_units", "metric" if metric else "imperial"))
    return found


def _charts(clause: str) -> list[SlotMatch]:
    found: list[SlotMatch] = []
    for m in _CHART.finditer(clause):
        kind = _CHARTS[m.group(1).split()[0].lower()]
        if _negated(clause, m.start()):
            found.append(SlotMatch(m.start(), f"chart_ban:{kind}", "off"))
        elif _CHART_USE.search(clause[: m.start()]):
            found.append(SlotMatch(m.start(), "chart_type", kind))
    if m3d := _CHART_3D.search(clause):
        found.append(SlotMatch(m3d.start(), "chart_3d", "off"))
    if color := _COLOR.search(clause):
        found.append(SlotMatch(color.start(), "chart_color", color.group(1).lower()))
    return found


def _outputs(clause: str) -> list[SlotMatch]:
    found: list[SlotMatch] = []
    if m := _LANGUAGE.search(clause):
        word = (m.group(1) or m.group(2)).lower()
        found.append(
            SlotMatch(
                m.start(), "reply_language", "en" if word in ("英文", "英语", "english") else "zh"
            )
        )
    if m := _IMAGE.search(clause):
        found.append(
            SlotMatch(m.start(), "image_format", m.group(1).lower().replace("jpeg", "jpg"))
        )
    if m := _EXPORT.search(clause):
        value = {"doc": "docx", "word": "docx", "excel": "xlsx", "ppt": "pptx"}.get(
            m.group(1).lower(), m.group(1).lower()
        )
        found.append(SlotMatch(m.start(), "export_format", value))
    if m := _SUMMARY.search(clause):
        top = m.group(2).lower() in ("最前", "前面", "开头", "第一", "top", "beginning", "start")
        found.append(SlotMatch(m.start(), "summary_position", "top" if top else "end"))
    positives = [m for m in _DIALECT.finditer(clause) if not _negated(clause, m.start())]
    if positives:
        value = positives[0].group(1).lower().replace("postgresql", "postgres")
        found.append(SlotMatch(positives[0].start(), "sql_dialect", value))
    return found


def detect_slots(clause: str) -> list[SlotMatch]:
    """All slots in one clause, in order of appearance, at most one per key."""
    found = sorted(_dates(clause) + _numbers(clause) + _charts(clause) + _outputs(clause))
    seen: set[str] = set()
    unique = []
    for match in found:
        if match.key not in seen:
            seen.add(match.key)
            unique.append(match)
    return unique


_TEMPLATES: dict[str, tuple[str, str]] = {
    "date_format": ("日期格式：{v}", "Date format: {v}"),
    "decimals": ("数字保留 {v} 位小数", "Use {v} decimal places"),
    "percent_decimals": ("百分比保留 {v} 位小数", "Percentages with {v} decimal places"),
    "currency": ("金额币种用 {v}", "Show currency in {v}"),
    "amount_unit": ("金额单位用{v}", "Show amounts in {v}"),
    "thousands_separator": ("千分位分隔符：{v}", "Thousands separators: {v}"),
    "reply_language": ("回复语言：{v}", "Reply language: {v}"),
    "chart_type": ("图表默认用 {v} 图", "Default chart type: {v}"),
    "chart_3d": ("图表不要 3D 效果", "No 3D effects in charts"),
    "chart_color": ("图表配色用 {v}", "Chart colour: {v}"),
    "image_format": ("图片导出格式用 {v}", "Export images as {v}"),
    "export_format": ("默认导出 {v}", "Export as {v} by default"),
    "summary_position": ("结论/摘要放在{v}", "Put the summary at the {v}"),
    "sql_dialect": ("SQL 方言：{v}", "SQL dialect: {v}"),
    "measure_units": ("计量单位：{v}", "Units: {v}"),
}
_VALUE_WORDS = {"zh": {"top": "最前面", "end": "最后", "en": "英文", "zh": "中文"},
                "en": {"en": "English", "zh": "Chinese"}}  # fmt: skip


def slot_template(key: str, value: str, language: Language) -> str:
    """A short entry text stating one slot, in ``language`` (used when one clause holds two)."""
    base = key.split(":", 1)[0]
    if base == "chart_ban":
        kind = key.split(":", 1)[1]
        return f"图表不要用 {kind} 图" if language == "zh" else f"Don't use {kind} charts"
    zh, en = _TEMPLATES.get(base, ("{k}：{v}", "{k}: {v}"))
    shown = _VALUE_WORDS[language].get(value, value)
    return (zh if language == "zh" else en).format(v=shown, k=key)
