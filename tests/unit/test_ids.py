"""Ids: prefixed ids, session ids, and the table-name sanitizer under hostile input."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_core import ids
from agent_core.errors import SchemaError

SAFE = re.compile(r"[A-Za-z0-9_]+", re.ASCII)

HOSTILE = [
    "",
    "a'b",
    'a"b',
    "a`b",
    "a;b",
    "x; DROP TABLE sessions; --",
    "a b",
    " a",
    "a\t",
    "a\nb",
    "a\x00b",
    "\x00",
    "a-b",
    "a.b",
    "../etc",
    "a/b",
    "sess_\u0430bc",  # Cyrillic 'а'
    "\u0455ess_x",  # Cyrillic 'ѕ'
    "ａbc",  # fullwidth Latin
    "abc\u0661",  # Arabic-Indic digit one: a unicode \d
    "ß",
    "a\u200bb",  # zero-width space
    "e\u0301",  # combining accent
    "x" * 65,
    "x" * 10_000,
]


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_sanitizer_refuses_hostile_input(value: str) -> None:
    with pytest.raises(SchemaError) as info:
        ids.sanitize_identifier(value)
    assert info.value.code == "invalid_identifier"


@pytest.mark.parametrize("value", [None, 1, b"abc", ["a"], 1.5])
def test_sanitizer_refuses_non_strings(value: object) -> None:
    with pytest.raises(SchemaError):
        ids.sanitize_identifier(value)


@pytest.mark.parametrize("value", ["a", "A_z_9", "_", "x" * 64, "sess_20260612_153022_a1b2"])
def test_sanitizer_returns_safe_input_unchanged(value: str) -> None:
    assert ids.sanitize_identifier(value) == value


@settings(max_examples=1000)
@given(value=st.text(max_size=80) | st.from_regex(r"[A-Za-z0-9_]{1,70}", fullmatch=True))
def test_anything_accepted_is_short_ascii_word(value: str) -> None:
    try:
        accepted = ids.sanitize_identifier(value)
    except SchemaError:
        assert SAFE.fullmatch(value) is None or len(value) > 64
    else:
        assert accepted == value
        assert SAFE.fullmatch(accepted) is not None
        assert len(accepted) <= 64


SESSION_ID = re.compile(r"sess_(\d{8})_(\d{6})_([0-9a-f]+)", re.ASCII)


def test_new_session_id_format() -> None:
    value = ids.new_session_id()
    match = SESSION_ID.fullmatch(value)
    assert match is not None, value
    assert ids.sanitize_identifier(value) == value
    assert ids.validate_session_id(value) == value
    assert len(value) <= 64


def test_new_session_id_uses_utc_time() -> None:
    local = datetime(2026, 6, 12, 23, 30, 22, tzinfo=timezone(timedelta(hours=-8)))
    value = ids.new_session_id(local)
    assert value.startswith("sess_20260613_073022_")
    assert ids.new_session_id(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)).startswith(
        "sess_20260102_030405_"
    )


def test_new_session_ids_are_unique_over_100k() -> None:
    values = [ids.new_session_id() for _ in range(100_000)]
    assert len(set(values)) == len(values)


def test_session_id_suffix_has_at_least_64_random_bits() -> None:
    match = SESSION_ID.fullmatch(ids.new_session_id())
    assert match is not None
    assert len(match.group(3)) * 4 >= 64


def test_validate_session_id_refuses_lookalikes_and_junk() -> None:
    for bad in ["sess_2026_1_a", "sess_20260612_153022_", "sess_20260612_153022_a1b2'", "run_1"]:
        with pytest.raises(SchemaError):
            ids.validate_session_id(bad)
    with pytest.raises(SchemaError):
        ids.validate_session_id("sess_20260612_153022_\u0430bcd")


@pytest.mark.parametrize("prefix", sorted(ids.ID_PREFIXES))
def test_new_id_is_valid_for_its_prefix_only(prefix: ids.IdPrefix) -> None:
    value = ids.new_id(prefix)
    assert re.fullmatch(rf"{prefix}_[0-9a-f]{{16}}", value)
    assert ids.is_valid_id(value, prefix)
    assert ids.validate_id(value, prefix) == value
    others = [p for p in ids.ID_PREFIXES if p != prefix and not value.startswith(p + "_")]
    assert not any(ids.is_valid_id(value, p) for p in others)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        "node_",
        "node",
        "node_a b",
        "node_x;y",
        "node_\u0430",
        "NODE_abc",
        None,
        5,
        "node_" + "a" * 65,
    ],
)
def test_validate_id_refuses_bad_ids(value: object) -> None:
    with pytest.raises(SchemaError) as info:
        ids.validate_id(value, "node")
    assert info.value.code == "invalid_id"
    assert len(info.value.details["value"]) <= 80


def test_new_ids_do_not_repeat() -> None:
    values = [ids.new_id("evt") for _ in range(100_000)]
    assert len(set(values)) == len(values)
