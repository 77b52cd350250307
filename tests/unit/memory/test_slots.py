"""Slot keys: the same preference gets the same key, its setting the value."""

import pytest

from agent_core.memory.slots import detect_slots, slot_template


@pytest.mark.parametrize(
    ("clause", "key", "value"),
    [
        ("以后日期一律用 YYYY/MM/DD 格式", "date_format", "ymd_slash"),
        ("日期要用 2024-01-31 这种格式", "date_format", "iso"),
        ("dates should be DD/MM/YYYY", "date_format", "dmy_slash"),
        ("以后保留一位小数", "decimals", "1"),
        ("Excel 里的百分比保留一位小数", "percent_decimals", "1"),
        ("switch currency to EUR", "currency", "EUR"),
        ("金额都用万元", "amount_unit", "万元"),
        ("不要千分位", "thousands_separator", "off"),
        ("改回中文回复", "reply_language", "zh"),
        ("answer me in English", "reply_language", "en"),
        ("以后图表默认用柱状图", "chart_type", "bar"),
        ("Don't use pie charts", "chart_ban:pie", "off"),
        ("不要用 3D 效果", "chart_3d", "off"),
        ("配色用 #333333", "chart_color", "#333333"),
        ("导出的图默认用 PNG", "image_format", "png"),
        ("报表默认发 PDF 版", "export_format", "pdf"),
        ("结论放在最前面", "summary_position", "top"),
        ("我说的是用 Hive 不是 Spark SQL", "sql_dialect", "hive"),
    ],
)
def test_detects_slot(clause: str, key: str, value: str) -> None:
    assert (key, value) in [(m.key, m.value) for m in detect_slots(clause)]


@pytest.mark.parametrize(
    "clause",
    ["柱状图看趋势不方便", "查 2024-05-20 之后的订单", "never put more than 5 categories in a pie"],
)
def test_mentions_are_not_settings(clause: str) -> None:
    assert detect_slots(clause) == []


def test_template_is_in_the_requested_language() -> None:
    assert slot_template("decimals", "2", "en") == "Use 2 decimal places"
    assert "小数" in slot_template("decimals", "2", "zh")
