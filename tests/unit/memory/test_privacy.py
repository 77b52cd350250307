"""Privacy: secrets and identifiers never survive; preferences beside them do."""

import pytest

from agent_core.memory.privacy import find_pii, luhn_valid, scrub_statement, scrub_text


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("key sk-proj-7fQ2xLmN9pR4tV8wY1zA3bC5", "credential"),
        ("AKIAIOSFODNN7EXAMPLE", "credential"),
        ("postgresql://etl:S3cr3t@db:5432/dw", "credential"),
        ("登录密码是 Qw!2024bi", "secret"),
        ("the secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "secret"),
        ("身份证 11010519491231002X", "id_number"),
        ("手机 13912345678", "phone"),
        ("+86 139 1234 5678", "phone"),
        ("call +44 20 7946 0958", "phone"),
        ("card 4111 1111 1111 1111", "card"),
        ("mail me at a.b@example.com", "email"),
    ],
)
def test_find_pii_kinds(text: str, kind: str) -> None:
    assert kind in find_pii(text)


@pytest.mark.parametrize(
    "text",
    [
        "日期用 YYYY-MM-DD",
        "查 2024-05-20 之后的订单",
        "配色 #1F4E79",
        "保留 2 位小数",
        "FP&A EMEA",
        "Noto Sans CJK SC",
    ],
)
def test_ordinary_preferences_are_clean(text: str) -> None:
    assert find_pii(text) == []


def test_luhn() -> None:
    assert luhn_valid("4111111111111111")
    assert not luhn_valid("4111111111111112")
    # A long number is kept out of memory whether or not it is a valid card: account and card
    # numbers written from memory fail the checksum as often as not.
    assert find_pii("订单号 4111 1111 1111 1112") == ["long_number"]
    assert find_pii("card 6222 0212 3456 7890") == ["id_number", "long_number"]


def test_mixed_sentence_keeps_preference_only() -> None:
    result = scrub_statement(
        "Remember my card 4111 1111 1111 1111 and always convert totals to USD."
    )
    assert result.text == "always convert totals to USD" and "card" in result.removed
    cn = scrub_statement("记住我手机号 13912345678，以后报表默认发 PDF 版。")
    assert cn.text == "以后报表默认发 PDF 版"


@pytest.mark.parametrize(
    "text",
    [
        "数据库密码：password=Hx8#kLm2，记住。",
        "我的身份证号是 11010519491231002X，帮我记一下。",
        "My AWS key is AKIAIOSFODNN7EXAMPLE, remember it.",
    ],
)
def test_secret_only_statement_yields_nothing(text: str) -> None:
    assert scrub_statement(text).text is None


def test_scrub_text_masks_in_place() -> None:
    out = scrub_text("failed for 13912345678 with token=abcdef123456 card 4111-1111-1111-1111")
    assert "13912345678" not in out and "abcdef123456" not in out and "4111" not in out
    assert out.startswith("failed for ")
