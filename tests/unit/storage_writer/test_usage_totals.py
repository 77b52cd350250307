"""Usage totals are counters the end of a run adds to, in its transaction: a session's totals
and an account's by day and model, each run counted once, another account's never shown."""

from __future__ import annotations

import datetime as dt

from agent_core.bus.contracts.storage import GetSessionUsage, GetSessionWithUsage, GetUsage
from agent_core.types.protocol import Usage
from agent_core.types.runtime import UsageTotals
from services.storage_writer.queries import QueryEngine
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.factories import claim_run, create_run, create_session, end_run


def _ended(writer: Writer, s: object, usage: Usage, model: str | None) -> None:
    run = create_run(s)  # type: ignore[arg-type]
    end = end_run(s, run.run_id, usage=usage)  # type: ignore[arg-type]
    end = end.model_copy(update={"model": model})
    receipts = writer.apply_batch([run, claim_run(s, run.run_id), end])  # type: ignore[arg-type]
    assert all(r.ok for r in receipts), [r.error for r in receipts]
    # A repeat of the end (a redelivered command) is answered as before and counts nothing.
    [again] = writer.apply_batch([end])
    assert again.duplicate


def test_ends_add_to_the_session_and_account_totals_once(
    writer: Writer, engine: QueryEngine
) -> None:
    a, b, other = create_session(), create_session(), create_session(account="acct_b")
    writer.apply_batch([a, b, other])
    _ended(writer, a, Usage(input_tokens=10, output_tokens=4, cache_read_tokens=3), "m1")
    _ended(writer, a, Usage(input_tokens=6, output_tokens=2), "m1")
    _ended(writer, b, Usage(input_tokens=1, output_tokens=1), "m2")
    _ended(writer, b, Usage(), "m2")  # used nothing: counts nothing
    _ended(writer, other, Usage(input_tokens=100, output_tokens=100), "m1")

    totals = GetSessionUsage(session_id=a.session_id).reply_of(
        engine.answer(GetSessionUsage(session_id=a.session_id, account_id="acct_a"))
    )
    assert totals is not None
    assert (totals.runs, totals.input_tokens, totals.output_tokens) == (2, 16, 6)
    assert (totals.cache_read_tokens, totals.total_tokens) == (3, 22)
    # Another account's session answers like a missing one.
    hidden = GetSessionUsage(session_id=a.session_id, account_id="acct_b")
    assert engine.answer(hidden).data is None

    # The row and its totals in one query: the same totals, the session's own row.
    both = GetSessionWithUsage(session_id=a.session_id, account_id="acct_a")
    found = both.reply_of(engine.answer(both))
    assert found is not None
    assert found.session.session_id == a.session_id
    assert found.usage == totals
    fresh = GetSessionWithUsage(session_id=create_session().session_id, account_id="acct_a")
    assert fresh.reply_of(engine.answer(fresh)) is None  # never created: not visible
    theirs = GetSessionWithUsage(session_id=other.session_id, account_id="acct_b")
    found = theirs.reply_of(engine.answer(theirs))
    assert found is not None
    assert found.usage.total_tokens == 200
    idle = create_session()
    writer.apply_batch([idle])  # no run ended yet: zeros
    zeros = GetSessionWithUsage(session_id=idle.session_id, account_id="acct_a")
    found = zeros.reply_of(engine.answer(zeros))
    assert found is not None
    assert found.usage == UsageTotals()
    stranger = GetSessionWithUsage(session_id=a.session_id, account_id="acct_b")
    assert stranger.reply_of(engine.answer(stranger)) is None

    today = dt.datetime.now(dt.UTC).date()
    query = GetUsage(account_id="acct_a", since=today, until=today)
    rows = query.reply_of(engine.answer(query))
    assert [(r.day, r.model, r.runs, r.total_tokens) for r in rows] == [
        (today, "m1", 2, 22),
        (today, "m2", 1, 2),
    ]
    before = GetUsage(account_id="acct_a", until=today - dt.timedelta(days=1))
    assert before.reply_of(engine.answer(before)) == []
