"""The offline token estimate, the model limits table and the calibration ratio."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_core.context import tokens
from agent_core.context.tokens import Calibration, estimate_text, model_limits
from tests.fakes.tokens import count_text

SAMPLES = {
    "prose": "The build finished after the tests passed; the report lists every warning. " * 30,
    "code": "def step(path: str, *, limit: int = 3) -> dict[str, int]:\n    return {'n': 1}\n" * 30,
    "json": '{"id": 17, "path": "output/part.csv", "ok": true, "rows": [1, 2, 3]}\n' * 30,
    "cjk": "第三个模块已构建完成，测试全部通过，报告列出了每一条警告。\n" * 30,
    "escaped": '{"content": "\\u7b2c\\u4e09\\u6b65 done\\n"}' * 30,
    "indented": "        value = compute(x)\n\t\tother\n" * 30,
}


def test_each_kind_of_text_is_within_twenty_percent_of_the_fakes_count_uncalibrated() -> None:
    for kind, text in SAMPLES.items():
        reference = count_text(text)
        assert abs(estimate_text(text) - reference) / reference < 0.2, kind


def test_cjk_costs_more_per_character_than_latin_text() -> None:
    assert estimate_text("上下文压缩" * 20) > 3 * estimate_text("compaction" * 10)
    assert estimate_text("") == 0 and estimate_text("a") == 1


# ASCII text made of the classes the estimate weighs, and their edges: runs of spaces, tabs, line
# breaks, the \x1c-\x1f separators a str pattern's \s takes, \u escapes.
_ASCII_PIECES = st.sampled_from(
    ["word", "A", "z", "7", "12345", ".", "{", "~", "`", " ", "  ", "\t", "\n", "\r\n", "\x1c",
     "\x1f", "\x0b", "\x0c", "\x00", "\x7f", "\\u00e9", "\\u12", "_", "-"]
)  # fmt: skip


@settings(max_examples=1000)
@given(
    text=st.lists(
        st.one_of(_ASCII_PIECES, st.text(st.characters(max_codepoint=127), max_size=6)),
        min_size=1,
        max_size=40,
    ).map("".join)
)
def test_the_ascii_path_counts_as_the_patterns_do(text: str) -> None:
    assert tokens._estimate_ascii(text.encode("ascii")) == tokens._estimate_any(text)


def test_every_sample_is_estimated_as_the_patterns_do() -> None:
    for kind, text in SAMPLES.items():
        assert estimate_text(text) == tokens._estimate_any(text), kind


def test_limits_come_from_config_then_the_table_then_the_default() -> None:
    assert model_limits("gpt-4o-mini").context_window == 128_000
    assert model_limits("openai/claude-sonnet-4-5").context_window == 200_000
    assert model_limits("some-local-model").context_window == 32_768
    own = model_limits("gpt-4o", context_window=10_000, max_output_tokens=9_000)
    assert (own.context_window, own.max_output_tokens) == (10_000, 5_000)  # at most half


def test_calibration_smooths_per_session_and_model_and_ignores_outliers() -> None:
    cal = Calibration()
    assert cal.ratio("s", "m") == 1.0
    assert cal.observe("s", "m", estimated=1000, reported=1200) == 1.2
    assert round(cal.observe("s", "m", estimated=1000, reported=1400), 3) == 1.3
    assert cal.ratio("s", "other") == 1.0 and cal.ratio("t", "m") == 1.0
    # A cached-prefix count (Ollama's prompt_eval_count) is not a tokenizer's difference.
    assert round(cal.observe("s", "m", estimated=1000, reported=40), 3) == 1.3
    assert round(cal.observe("s", "m", estimated=0, reported=40), 3) == 1.3
