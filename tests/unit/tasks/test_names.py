"""Model-chosen list names become safe, distinct file names."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_core.tasks.names import WAL_SUFFIX, list_file_name, list_file_stem

SAFE_STEM = re.compile(r"[a-z0-9][a-z0-9_-]*")
MAX_STEM_LEN = 64 + 1 + 12


@pytest.mark.parametrize("name", ["build", "api-v2", "step_1", "a"])
def test_clean_names_are_kept(name: str) -> None:
    assert list_file_stem(name) == name
    assert list_file_name(name) == name + WAL_SUFFIX


@pytest.mark.parametrize(
    ("name", "readable"),
    [
        ("../../etc/passwd", "etc_passwd"),
        ("..", "list"),
        ("a/b\\c", "a_b_c"),
        ("nul\x00byte", "nul_byte"),
        ("Build API", "build_api"),
        ("Café crème", "cafe_creme"),
        ("设计", "list"),
        ("-flag", "flag"),
        ("con", "con"),
        ("x-0123456789ab", "x-0123456789ab"),  # looks hashed: hashed again
    ],
)
def test_unsafe_names_are_sanitized_and_hashed(name: str, readable: str) -> None:
    stem = list_file_stem(name)
    assert re.fullmatch(re.escape(readable) + r"-[0-9a-f]{12}", stem), stem


def test_long_names_are_bounded() -> None:
    stem = list_file_stem("x" * 10_000)
    assert len(stem) <= MAX_STEM_LEN and SAFE_STEM.fullmatch(stem)


@pytest.mark.parametrize(
    ("a", "b"),
    [("Build", "build"), ("a/b", "a_b"), ("a b", "a.b"), ("设计", "计划"), ("Café", "Cafe")],
)
def test_names_that_sanitize_alike_get_distinct_files(a: str, b: str) -> None:
    assert list_file_stem(a) != list_file_stem(b)


def test_equivalent_unicode_forms_share_a_file() -> None:
    assert list_file_stem("Caf\u00e9") == list_file_stem("Cafe\u0301")  # NFC vs NFD


@given(st.text(max_size=300))
def test_every_name_gives_a_safe_bounded_stem(name: str) -> None:
    stem = list_file_stem(name)
    assert SAFE_STEM.fullmatch(stem) and len(stem) <= MAX_STEM_LEN
    assert stem == list_file_stem(name)  # deterministic


@given(st.text(max_size=40), st.text(max_size=40))
def test_distinct_names_never_share_a_stem(a: str, b: str) -> None:
    if a != b and list_file_stem(a) == list_file_stem(b):
        assert unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b)
