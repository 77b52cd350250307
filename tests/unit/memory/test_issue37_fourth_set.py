"""The general kinds the fourth blind set (``tests/data/memory/fourth``) missed, each in English
and Chinese with sentences of its own (none is from a labelled set).

Every test failed on main before the change: a new value for a remembered attribute said in
other words (or with only a deictic, "就用这个") was added beside the old one; "from this week
on" phrasings other than the listed ones made nothing durable; a bound said to be looser or
stricter ("放宽", "relax") revised nothing.
"""

from __future__ import annotations

import pytest

from tests.unit.memory.test_issue37_kinds import entries, remember, texts


@pytest.mark.parametrize(
    ("first", "then", "new", "old", "kept"),
    [
        (
            "Flag any ticket that has been open for more than 10 days. Always.",
            "Starting next month the ticket age limit is 7 days, keep the flag colour amber.",
            "7",
            "10",
            "open",
        ),
        (
            "每条推送文案不超过 40 个字，结尾带上活动链接，以后都这样。",
            "推送文案改成 60 个字以内吧。",
            "60",
            "40",
            "链接",
        ),
        (
            "置信区间我们用 0.95，并且报告双尾结果。以后都按这个。",
            "0.9，以后置信区间就用这个。",
            "0.9",
            "0.95",
            "双尾",
        ),
        (
            "正文字号一直是小四，标题用黑体，你按这个来。",
            "五号字，正文，之后都用这个。",
            "五号",
            "小四",
            "黑体",
        ),
    ],
)
def test_a_new_value_replaces_the_old_one_in_its_entry(
    first: str, then: str, new: str, old: str, kept: str
) -> None:
    """The entry keeps its wording and what else it said; only its value changes."""
    found = texts(remember(first, then))
    assert len(found) == 1, found
    assert new in found[0] and old not in found[0].replace(new, "") and kept in found[0], found


@pytest.mark.parametrize(
    "text",
    [
        "从下个月起，周报附上环比数据。",
        "自本季度起，预算表按部门拆分。",
        "As of next quarter, budget sheets are split by department.",
        "Starting this week, attach the week-over-week change to the status note.",
    ],
)
def test_a_period_that_starts_now_makes_a_rule_durable(text: str) -> None:
    assert len(entries(remember(text))) == 1


@pytest.mark.parametrize(
    ("first", "then", "new", "old"),
    [
        (
            "Keep the abstract under 150 words. Always.",
            "You can relax that to 200 words.",
            "200",
            "150",
        ),
        ("摘要控制在两段以内，以后都这样。", "摘要可以放宽点，四段以内都行。", "四段", "两段"),
    ],
)
def test_a_bound_made_looser_revises_the_rule(first: str, then: str, new: str, old: str) -> None:
    found = texts(remember(first, then))
    assert len(found) == 1 and new in found[0] and old not in found[0], found


@pytest.mark.parametrize(
    ("rule", "forget", "instead"),
    [
        (
            "Our sprint reviews are on Thursdays, so always send the burndown on Wednesday evening.",
            "Forget what I told you about the sprint reviews - we've moved them to Mondays.",
            "Mondays",
        ),
        (
            "Always show revenue in GBP in every report.",
            "Forget the GBP thing - the board now wants euros.",
            "euros",
        ),
        (
            "库存周转天数我们按“期末库存 ÷ 日均销量”算，以后都这样。",
            "库存周转的算法先从记忆里去掉吧，财务要重新定。",
            None,
        ),
        ("缺货超过 3 天的门店要标红，以后都照办。", "忘掉标红那条吧，现在补货很及时了。", None),
    ],
)
def test_a_request_to_forget_names_its_topic_in_other_words(
    rule: str, forget: str, instead: str | None
) -> None:
    """The back-reference words ("what I told you about", "the … thing", "那条") are not the
    topic; the topic may come before the marker; what holds instead is remembered."""
    found = texts(remember(rule, forget))
    assert found == ([] if instead is None else [found[0]]), found
    assert instead is None or instead in found[0]
