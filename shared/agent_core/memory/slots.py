"""Slot keys for common preferences, so a newer value replaces an older one without an LLM.

A slot is a (key, value) pair read from one clause: ``("date_format", "iso")``,
``("currency", "EUR")``, ``("chart_ban:pie", "off")``. Two entries of one scope with the same key
describe the same preference; when their values differ, the newer entry replaces the older.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ._text import Language

__all__ = ["SlotMatch", "detect_slots", "mentions_value", "slot_template"]


@dataclass(frozen=True, order=True)
class SlotMatch:
    """One preference found in a clause: ``key`` names the preference, ``value`` its setting."""

    start: int
    key: str
    value: str


_NEG = r"(?:不要|别|不用|不准|禁止|不能|\bavoid\b|\bnever\b|\bno\b|\bnot\b|\bdon't\b|\bdo not\b|\bwithout\b|而不是|不是)"
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

_ISO_CURRENCIES = (
    "usd",
    "eur",
    "cny",
    "gbp",
    "jpy",
    "hkd",
    "aud",
    "cad",
    "sgd",
    "chf",
    "krw",
    "inr",
    "twd",
    "nzd",
    "sek",
    "nok",
    "dkk",
    "brl",
    "mxn",
    "zar",
    "aed",
    "thb",
    "myr",
)
_CURRENCIES = {"rmb": "CNY", "美元": "USD", "欧元": "EUR", "人民币": "CNY", "英镑": "GBP",
               "日元": "JPY", "港币": "HKD", "港元": "HKD", "澳元": "AUD", "加元": "CAD",
               "新加坡元": "SGD", "新币": "SGD", "瑞郎": "CHF", "韩元": "KRW", "台币": "TWD",
               **{c: c.upper() for c in _ISO_CURRENCIES}}  # fmt: skip
_CURRENCY = re.compile(
    r"(?<![a-z])(" + "|".join((*_ISO_CURRENCIES, "rmb")) + r")(?![a-z])|"
    r"美元|欧元|人民币|英镑|日元|港币|港元|澳元|加元|新加坡元|新币|瑞郎|韩元|台币",
    _I,
)
_UNIT = re.compile(
    r"(万元|千元|百万元|亿元)|(?:用|以|单位[是为:：]?|改成|换成|改为|改用)(元)(?![素旦])|\bin (thousands|millions|billions)\b",
    _I,
)
_THOUSANDS = re.compile(r"千分位|thousands?[ -]separators?", _I)
_LANG_WORD = r"(英文|英语|中文|汉语|english|chinese)"
_LANG_VERB = r"(?:回复|回答|答复|reply|replies|answer|respond|responses|write to me)"
_LANGUAGE = re.compile(
    rf"{_LANG_VERB}[^，,。.]{{0,12}}?{_LANG_WORD}|{_LANG_WORD}\s*{_LANG_VERB}", _I
)
_CHARTS = {"柱状图": "bar", "条形图": "hbar", "bar": "bar", "horizontal": "hbar", "折线图": "line",
           "line": "line",
           "饼图": "pie", "pie": "pie", "环形图": "donut", "donut": "donut", "面积图": "area",
           "area": "area", "散点图": "scatter", "scatter": "scatter"}  # fmt: skip
_CHART = re.compile(
    r"(柱状图|条形图|折线图|饼图|环形图|面积图|散点图|\b(?:horizontal bar|bar|line|pie|donut|area|scatter)"
    r"\s{0,2}(?:charts?|graphs?|s\b))",
    _I,
)
_CHART_USE = re.compile(
    r"(?:默认|都|一律|改用|用|使用|换成|改成|use|prefer|switch to|default to)\s*$", _I
)
# A ban or its lifting written after the chart's name ("饼图以后别用了", "饼图还是可以用的").
_CHART_BAN_AFTER = re.compile(
    r"^\s{0,2}(?:以后|今后|就|都|也)?\s{0,2}(?:别|不要|不用|不准|禁止)再?用"
)
_CHART_ALLOWED_AFTER = re.compile(r"^\s{0,2}(?:还是|也|又|其实)?\s{0,2}(?:可以|能)(?:继续)?用")
_CHART_3D = re.compile(rf"{_NEG}[^，,。.]{{0,8}}(?:3d|三维|立体)", _I)
_COLOR = re.compile(
    r"(?:配色|主色|主题色|色系|颜色|colou?r scheme|palette|colou?rs)[^，,。.]{0,12}?(#[0-9a-f]{6}|#[0-9a-f]{3})\b",
    _I,
)
# A palette named without a hex value ("换回默认的蓝绿色系"): the same preference, another value.
_COLOR_TOPIC = re.compile(r"配色|主题色|色系|colou?r scheme|palette", _I)
_IMAGE = re.compile(r"(?:导出|输出|保存|存成|export|save)[^，,。.]{0,16}?\b(png|svg|jpe?g)\b", _I)
_EXPORT = re.compile(
    r"(?:导出|输出|发|保存|存成|export|save|send|deliver)[^，,。.]{0,16}?\b(pdf|docx?|word|xlsx|excel|csv|pptx?|markdown)\b",
    _I,
)
_SUMMARY_WORDS = (
    r"结论|摘要|总结|要点|核心结论|summary|summaries|conclusions?|takeaways?|key findings|"
    r"highlights|tl;?dr|bottom line"
)
_SUMMARY = re.compile(
    rf"({_SUMMARY_WORDS})[^，,。.;]{{0,24}}?(最前|前面|开头|第一|top|beginning|start|first|front|"
    r"最后|末尾|结尾|\bend\b|bottom|last)",
    _I,
)
_SUMMARY_VERB = re.compile(
    rf"\b(open|start|begin|lead|end|finish|close)s?\s(?:with|on)\s(?:the |a |an )?(?:\w+ ){{0,2}}?(?:{_SUMMARY_WORDS})",
    _I,
)
_TOP_WORDS = ("最前", "前面", "开头", "第一", "top", "beginning", "start", "first", "front", "open",
              "begin", "lead")  # fmt: skip
_DIALECTS = ("hive", "mysql", "postgresql", "postgres", "snowflake", "bigquery", "clickhouse",
             "spark sql", "presto", "trino", "oracle", "sql server", "t-sql", "sqlite")  # fmt: skip
_DIALECT = re.compile(
    r"(?<![a-z])(" + "|".join(re.escape(d) for d in _DIALECTS) + r")(?![a-z])", _I
)
_MEASURE = re.compile(r"公制|英制|\bmetric\b|\bimperial\b", _I)
_DAYS = {"monday": "mon", "周一": "mon", "星期一": "mon", "sunday": "sun", "周日": "sun",
         "星期日": "sun", "星期天": "sun", "周天": "sun", "saturday": "sat", "周六": "sat",
         "星期六": "sat"}  # fmt: skip
_DAY = r"(monday|sunday|saturday|周一|星期一|周日|星期日|星期天|周天|周六|星期六)"
_WEEK_START = re.compile(
    rf"(?:weeks?\s(?:starts?|begins?)\s(?:on\s)?|start (?:the |our )?weeks? on |"
    rf"(?:每周|一周|周)(?:从|以)){_DAY}|{_DAY}(?:开始|为一周的第一天|作为一周的开始)|"
    rf"{_DAY}\s(?:as (?:the )?(?:week start|start of the week|first day of the week))",
    _I,
)
_TIMEZONE = re.compile(
    r"(?<![a-z])(utc|gmt|aest|aedt|acst|awst|cst|est|edt|pst|pdt|cet|cest|bst|jst|sgt|hkt|kst)(?![a-z])|"
    r"(北京时间|东八区)|(?<![a-z])utc\s?[+-]\s?\d{1,2}|"
    r"(?<![a-z])(pacific|eastern|central|mountain) time(?![a-z])",
    _I,
)
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")  # fmt: skip
_FISCAL = re.compile(
    r"(?:fiscal year|financial year|财年|财务年度|会计年度|\bfy\b)[^，,。.;]{0,24}?(?:starts?|begins?|从|开始|起)"
    r"[^，,。.;]{0,12}?(" + "|".join(_MONTHS) + r"|\d{1,2}\s?月|[一二三四五六七八九十]{1,3}月)",
    _I,
)
_NEGATIVE = re.compile(
    r"(?:negative(?: numbers?| values?| amounts?)?|负数|负值)[^，,。.;]{0,30}?(parenthes|brackets|括号|minus|负号|红)|"
    r"(parenthes|brackets|括号|minus|负号|红)[^，,。.;]{0,24}?(?:for\s)?(?:negative|负数|负值)",
    _I,
)
_LAYOUT = re.compile(
    r"(long format|long table|long layout|长表|tidy format|wide format|wide table|宽表)|"
    r"(don'?t pivot|do not pivot|不要透视|别透视)",
    _I,
)


# The value said just before a palette word: after a verb ("用", "换成") or a space, a colour
# of one to three characters or an English word ("the"/"a" left out).
_NAMED_BEFORE = re.compile(
    r"(?:^|[用成为回是]|\s)(?!the\b|a\b|our\b|my\b)([\u4e00-\u9fff]{1,3}|[A-Za-z][A-Za-z-]{1,19})\s{0,3}$",
    _I,
)


_PREPOSITION = re.compile(r"\s{0,3}(?:for|in|on|across|throughout|everywhere)\b", _I)


def _phrase(text: str) -> str:
    """A short value key for free-form slot values (letters, digits and CJK only)."""
    kept = "".join(c for c in text.casefold() if c.isalnum() or c == "#")
    return kept[:24] or "default"


def _zh_month(raw: str) -> int:
    digits = "".join(c for c in raw if c.isdigit())
    if digits:
        return int(digits)
    numerals = "一二三四五六七八九十"
    chars = raw.rstrip("月")
    if chars.startswith("十"):
        return 10 + (numerals.index(chars[1]) + 1 if len(chars) > 1 else 0)
    return numerals.index(chars[0]) + 1


_NEG_AFTER = re.compile(r"\s{0,2}(?:别|不要|不用|去掉|取消|都不要|就不要)")


def _negated(clause: str, start: int, end: int | None = None) -> bool:
    """A negation before the match ("不要用饼图", "no pie"), or right after it ("千分位别加了")."""
    if re.search(rf"{_NEG}[^，,。.]{{0,10}}$", clause[:start], _I) is not None:
        return True
    return end is not None and _NEG_AFTER.match(clause, end) is not None


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
                m.start(),
                "thousands_separator",
                "off" if _negated(clause, m.start(), m.end()) else "on",
            )
        )
    if m := _FISCAL.search(clause):
        raw = m.group(1).lower().replace(" ", "")
        month = _MONTHS.index(raw) + 1 if raw in _MONTHS else _zh_month(raw)
        found.append(SlotMatch(m.start(), "fiscal_year_start", str(month)))
    if m := _NEGATIVE.search(clause):
        word = (m.group(1) or m.group(2)).lower()
        value = "minus" if word in ("minus", "负号") else "red" if word == "红" else "parentheses"
        found.append(SlotMatch(m.start(), "negative_format", value))
    if m := _MEASURE.search(clause):
        metric = m.group(0).lower() in ("公制", "metric")
        found.append(SlotMatch(m.start(), "measure_units", "metric" if metric else "imperial"))
    return found


def _charts(clause: str) -> list[SlotMatch]:
    found: list[SlotMatch] = []
    for m in _CHART.finditer(clause):
        word = m.group(1).split()[0].lower()
        kind = _CHARTS.get(word) or _CHARTS[word.removesuffix("s")]  # "areas", "pies"
        after = clause[m.end() :]
        if _negated(clause, m.start()) or _CHART_BAN_AFTER.match(after):
            found.append(SlotMatch(m.start(), f"chart_ban:{kind}", "off"))
        elif _CHART_ALLOWED_AFTER.match(after):
            found.append(SlotMatch(m.start(), f"chart_ban:{kind}", "on"))
        elif _CHART_USE.search(clause[: m.start()]):
            found.append(SlotMatch(m.start(), "chart_type", kind))
    if m3d := _CHART_3D.search(clause):
        found.append(SlotMatch(m3d.start(), "chart_3d", "off"))
    if color := _COLOR.search(clause):
        found.append(SlotMatch(color.start(), "chart_color", color.group(1).lower()))
    elif topic := _COLOR_TOPIC.search(clause):
        rest = clause[topic.end() :]
        after = _phrase(rest)
        unnamed = after == "default" or _PREPOSITION.match(rest)  # "… palette for charts"
        if unnamed and (before := _NAMED_BEFORE.search(clause[: topic.start()])):
            after = _phrase(before.group(1))  # "都用蓝色系", "换成绿色系", "the teal palette"
        found.append(SlotMatch(topic.start(), "chart_color", after))
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
    if m := _SUMMARY_VERB.search(clause) or _SUMMARY.search(clause):
        word = m.group(1) if m.re is _SUMMARY_VERB else m.group(2)
        top = word.lower() in _TOP_WORDS
        found.append(SlotMatch(m.start(), "summary_position", "top" if top else "end"))
    if m := _WEEK_START.search(clause):
        day = next(g for g in m.groups() if g)
        found.append(SlotMatch(m.start(), "week_start", _DAYS[day.lower()]))
    if m := _TIMEZONE.search(clause):
        found.append(SlotMatch(m.start(), "timezone", _phrase(m.group(0))))
    if m := _LAYOUT.search(clause):
        wide = (m.group(1) or "").lower() in ("wide format", "wide table", "宽表")
        found.append(SlotMatch(m.start(), "table_layout", "wide" if wide else "long"))
    positives = [m for m in _DIALECT.finditer(clause) if not _negated(clause, m.start())]
    if positives:
        value = positives[0].group(1).lower().replace("postgresql", "postgres")
        found.append(SlotMatch(positives[0].start(), "sql_dialect", value))
    return found


# A preference is stated in a short clause; longer text is read only this far (bounded work).
MAX_CLAUSE_CHARS = 600


def detect_slots(clause: str) -> list[SlotMatch]:
    """All slots in one clause, in order of appearance, at most one per key."""
    return list(_slots(clause[:MAX_CLAUSE_CHARS]))


@functools.lru_cache(maxsize=1024)  # the rules ask about one clause several times
def _slots(clause: str) -> tuple[SlotMatch, ...]:
    found = sorted(_dates(clause) + _numbers(clause) + _charts(clause) + _outputs(clause))
    seen: set[str] = set()
    unique = []
    for match in found:
        if match.key not in seen:
            seen.add(match.key)
            unique.append(match)
    return tuple(unique)


def mentions_value(clause: str, key: str, value: str) -> bool:
    """Whether ``clause`` names ``value`` of slot ``key``, even without the words that set it.

    "两位太细了" after "百分比还是保留一位小数" names the old 2 decimals; a clause that only
    names a replaced value must not keep it alive in the new entry's text.
    """
    clause = clause[:MAX_CLAUSE_CHARS]
    if any(m.key == key and m.value == value for m in detect_slots(clause)):
        return True
    if key in ("decimals", "percent_decimals"):
        forms = [value, *(word for word, v in _NUM.items() if v == value and word != "no")]
        alternation = "|".join(re.escape(f) for f in forms)
        return re.search(rf"(?<![a-z])(?:{alternation})\s*(?:位|decimal)", clause, _I) is not None
    words = {value, *(w[value] for w in _VALUE_WORDS.values() if value in w)}
    return any(
        len(w) >= 2 and re.search(rf"(?<![\w]){re.escape(w)}(?![\w])", clause, _I) for w in words
    )


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
    "week_start": ("每周从{v}开始", "Weeks start on {v}"),
    "timezone": ("时间统一用 {v}", "Timestamps in {v}"),
    "fiscal_year_start": ("财年从 {v} 月开始", "Fiscal year starts in month {v}"),
    "negative_format": ("负数显示为 {v}", "Show negative numbers as {v}"),
    "table_layout": ("表格用{v}格式", "Keep tables in {v} format"),
}
_VALUE_WORDS = {"zh": {"top": "最前面", "end": "最后", "en": "英文", "zh": "中文", "mon": "周一",
                       "sun": "周日", "sat": "周六", "long": "长表", "wide": "宽表",
                       "parentheses": "括号", "minus": "负号", "red": "红色"},
                "en": {"en": "English", "zh": "Chinese", "mon": "Monday", "sun": "Sunday",
                       "sat": "Saturday"}}  # fmt: skip


def slot_template(key: str, value: str, language: Language) -> str:
    """A short entry text stating one slot, in ``language`` (used when one clause holds two)."""
    base = key.split(":", 1)[0]
    if base == "chart_ban":
        kind = key.split(":", 1)[1]
        return f"图表不要用 {kind} 图" if language == "zh" else f"Don't use {kind} charts"
    zh, en = _TEMPLATES.get(base, ("{k}：{v}", "{k}: {v}"))
    shown = _VALUE_WORDS[language].get(value, value)
    return (zh if language == "zh" else en).format(v=shown, k=key)
