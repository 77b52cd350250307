"""Rule consolidation over whole interactions: repeat → one entry, change → new value only."""

from datetime import UTC, datetime

from agent_core.memory import (
    Interaction,
    MemoryDocument,
    Turn,
    TurnRole,
    UpdateOp,
    apply_updates,
    consolidate_fallback,
    detect_signals,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _run(*messages: str, skills: tuple[str, ...] = ()) -> dict[str, MemoryDocument]:
    docs: dict[str, MemoryDocument] = {}
    for message in messages:
        ix = Interaction(turns=[Turn(role=TurnRole.USER, content=message)], skills=list(skills))
        batch = consolidate_fallback(detect_signals(ix), docs, now=NOW)
        docs = apply_updates(docs, batch, now=NOW).documents
    return docs


def _texts(docs: dict[str, MemoryDocument], scope: str = "user") -> list[str]:
    return [e.text for e in docs[scope].entries] if scope in docs else []


def test_repeated_preference_yields_one_entry() -> None:
    docs = _run(
        "记住以后日期用 YYYY-MM-DD。", "以后日期用 YYYY-MM-DD。", "日期用 YYYY-MM-DD，记住了吗？"
    )
    assert _texts(docs) == ["记住以后日期用 YYYY-MM-DD"]


def test_changed_preference_leaves_only_the_new_value() -> None:
    docs = _run(
        "以后金额保留两位小数。",
        "以后保留一位小数就行。",
        "Always use USD.",
        "Switch to EUR from now on.",
    )
    assert _texts(docs) == ["以后保留一位小数就行", "Switch to EUR from now on"]


def test_sibling_rule_survives_a_slot_change() -> None:
    # Two complete settings in one sentence are written apart (issue 37): the slot's entry
    # changes, the sibling rule stays as it was.
    docs = _run("以后回复都用英文，报告里的专有名词保留中文原文。", "改回中文回复吧。")
    texts = _texts(docs)
    assert len(texts) == 2 and not any("都用英文" in t for t in texts)
    assert any("中文回复" in t for t in texts) and any("专有名词" in t for t in texts)


def test_forget_deletes_and_statements_are_not_written() -> None:
    docs = _run(
        "Next time, put the methodology section at the end of the report.", skills=("report",)
    )
    assert len(_texts(docs, "skill:report")) == 1
    docs = _run(
        "Next time, put the methodology section at the end of the report.",
        "Forget what I said about the methodology section.",
        "Use bar charts in the report.",
        skills=("report",),
    )
    assert _texts(docs, "skill:report") == []


def test_batch_replays_to_the_same_state() -> None:
    ix = Interaction(
        turns=[
            Turn(role=TurnRole.USER, content="金额以后都用万元，保留两位小数。以后保留一位小数。")
        ]
    )
    batch = consolidate_fallback(detect_signals(ix), {}, now=NOW)
    assert [u.op for u in batch.updates] == [UpdateOp.ADD, UpdateOp.ADD, UpdateOp.UPDATE]
    docs = apply_updates({}, batch, now=NOW).documents
    assert _texts(docs) == ["金额以后都用万元", "以后保留一位小数"]


def test_single_clause_with_two_slots_splits_into_templates() -> None:
    docs = _run("Always show currency in USD with two decimals.", "From now on use EUR.")
    assert _texts(docs) == ["From now on use EUR", "Use 2 decimal places"]
