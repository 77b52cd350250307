"""The search outbox's ledger: what waits, what a flush reads, what it leaves pending."""

from __future__ import annotations

import sqlite3

from services.storage_writer.outbox import OutboxLedger


def test_rows_left_by_a_previous_run_are_pending_from_the_start() -> None:
    ledger = OutboxLedger(4, {0: 3, 2: 0, 3: 5})
    assert ledger.pending == {0: 3, 3: 5} and ledger.rows == 8 and ledger.waiting == 8
    empty = OutboxLedger(4, {})
    assert empty.waiting == 0 and empty.plan(_no_connection) is None


def test_uncounted_rows_wait_as_one_until_the_first_plan_counts_every_shard() -> None:
    conns = [sqlite3.connect(":memory:") for _ in range(3)]
    for conn, rows in zip(conns, (2, 0, 1), strict=True):
        conn.execute("CREATE TABLE search_outbox (seq INTEGER PRIMARY KEY)")
        conn.executemany("INSERT INTO search_outbox VALUES (?)", [(i,) for i in range(rows)])
    ledger = OutboxLedger(3, None)
    assert ledger.waiting == 1  # something may wait: a search must flush first
    plan = ledger.plan(conns.__getitem__)
    assert plan is not None and plan.after == {0: 0, 2: 0} and plan.counted == {0: 2, 2: 1}
    assert ledger.waiting == 3 and not ledger.unscanned
    for conn in conns:
        conn.close()


def test_a_plan_with_a_limit_stops_after_the_shard_that_reaches_it() -> None:
    ledger = OutboxLedger(8, {})
    for shard, rows in ((5, 5), (1, 4), (0, 3)):
        ledger.deferred(shard, rows)
    plan = ledger.plan(_no_connection, max_rows=5)
    assert plan is not None and list(plan.after) == [0, 1]  # 3 < 5, then 7 >= 5
    whole = ledger.plan(_no_connection)
    assert whole is not None and list(whole.after) == [0, 1, 5]


def test_rows_written_during_a_flush_stay_pending_and_the_flushed_seq_waits_for_deletion() -> None:
    ledger = OutboxLedger(2, {})
    ledger.deferred(0, 3)
    plan = ledger.plan(_no_connection)
    assert plan is not None
    ledger.deferred(0, 2)  # committed while the flush ran
    ledger.record(plan, {0: 10})
    assert ledger.pending == {0: 2} and ledger.rows == 2 and ledger.flushed == {0: 10}
    again = ledger.plan(_no_connection)
    assert again is not None and again.after == {0: 10}  # read after what is indexed
    ledger.deleted(0)
    assert ledger.flushed == {}
    ledger.record(again, {0: 12})
    assert ledger.pending == {} and ledger.rows == 0 and ledger.waiting == 0
    assert ledger.take_flushed() == [(0, 12)]  # a closing writer deletes them itself
    assert ledger.take_flushed() == [] and ledger.plan(_no_connection) is None


def _no_connection(shard: int) -> sqlite3.Connection:
    raise AssertionError(f"shard {shard} opened: every row was counted already")
