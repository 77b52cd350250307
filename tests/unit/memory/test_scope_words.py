"""A skill's table words counted in a statement (``scope._hits``): the one search that says
"none" must agree with counting each word on its own, whatever the words and the text."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from agent_core.memory.scope import DEFAULT_SKILL_KEYWORDS, _hits, skill_of
from agent_core.memory.slots import detect_slots


def _each(text: str, words: list[str]) -> int:
    low = text.casefold()
    return sum(1 for w in words if re.search(rf"(?<![a-z]){re.escape(w)}(?:e?s)?(?![a-z])", low))


_WORD = st.text(alphabet="abcdemil -.邮件", min_size=1, max_size=6)


@given(st.lists(_WORD, max_size=6), st.text(alphabet="abcdemils -.邮件!", max_size=40))
@example(["a", "mail"], "as e-mails")
def test_a_count_is_each_word_counted_on_its_own(words: list[str], text: str) -> None:
    assert _hits(text, words) == _each(text, words)


def test_overlapping_words_each_count_and_a_text_without_any_counts_none() -> None:
    email = list(DEFAULT_SKILL_KEYWORDS["email"])
    assert _hits("Send the e-mail with cc to the boss", email) == _each(
        "Send the e-mail with cc to the boss", email
    )
    assert _hits("Send the e-mail with cc to the boss", email) == 3  # e-mail, mail, cc
    assert _hits("round the totals to two places", email) == 0
    assert _hits("two emails and the boxes", ["email", "box", "mail"]) == 2  # plurals count
    assert _hits("anything", []) == 0


def test_a_clause_asked_again_gives_equal_slots_that_the_caller_may_change() -> None:
    first = detect_slots("dates as YYYY-MM-DD, two decimals")
    first.clear()
    again = detect_slots("dates as YYYY-MM-DD, two decimals")
    assert [m.key for m in again] == ["date_format", "decimals"]


def test_a_compound_skill_is_named_by_its_spaced_form_and_not_by_a_verb() -> None:
    skills = ["ppt_builder", "data_cleaning"]
    assert skill_of("In the data cleaning step, drop empty rows.", skills) == "data_cleaning"
    assert skill_of("Every ppt_builder deck gets a title slide.", skills) == "ppt_builder"
    assert skill_of("Please keep answers short.", skills) is None
    # Both named: the first enabled one wins, found by the spaced form of its compound name.
    both = ["data_cleaning", "excel"]
    assert skill_of("For data cleaning, open the excel workbook first.", both) == "data_cleaning"
