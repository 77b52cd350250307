"""The writer's ledger of the shards' search outboxes: what waits to be indexed, and what a
flush moved but the shard still holds.

SQLite's writer puts the texts a batch indexes in the shard's ``search_outbox``, committed with
what they index (``search_outbox.defer_ops``); a flush moves them into the catalog's FTS5 table,
many shards' rows in one transaction (``search_outbox.flush_outbox``, run by the writer or in the
index's own process). This ledger is the bookkeeping between the two, with no connection of its
own (the writer lends one, ``conn_of``): rows written and not yet flushed, by shard; and the last
seq each flush indexed, which the shard's next transaction deletes (no commit of its own for
that). It lives on the writer's thread; :attr:`OutboxLedger.rows` alone is read from others (an
int).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from sqlite3 import Connection

__all__ = ["FlushPlan", "OutboxLedger"]


@dataclass
class FlushPlan:
    """One flush of the search outbox (:meth:`OutboxLedger.plan`)."""

    after: dict[int, int] = field(default_factory=dict)  # shard -> read its rows after this seq
    counted: dict[int, int] = field(default_factory=dict)  # shard -> rows pending when planned


class OutboxLedger:
    """Pending outbox rows by shard, and the seqs flushed but not yet deleted."""

    def __init__(self, shard_count: int, left: Mapping[int, int] | None) -> None:
        """``left``: the rows a previous run left, by shard, as counted when the files were
        opened (``shards.open_shards``); ``None`` has the first :meth:`plan` count them, which
        opens every one of the ``shard_count`` shards."""
        self.shard_count = shard_count
        self.pending: dict[int, int] = {}  # shard -> rows written, not yet flushed
        self.rows = 0  # their sum, a plain int that other threads may read
        self.flushed: dict[int, int] = {}  # shard -> last seq flushed, not yet deleted
        self.unscanned = left is None
        if left:
            self.pending = {shard: n for shard, n in left.items() if n > 0}
            self.rows = sum(self.pending.values())

    @property
    def waiting(self) -> int:
        """Texts not yet searchable (1 while a previous run's rows are still uncounted)."""
        return self.rows + int(self.unscanned)

    def deferred(self, shard: int, rows: int) -> None:
        """``rows`` more were committed to ``shard``'s outbox."""
        self.pending[shard] = self.pending.get(shard, 0) + rows
        self.rows += rows

    def deleted(self, shard: int) -> None:
        """``shard``'s transaction that deleted its flushed rows committed. Every row up to the
        flushed seq is gone, and seqs are never given twice (AUTOINCREMENT), so any row left or
        to come has a larger one."""
        self.flushed.pop(shard, None)

    def take_flushed(self) -> list[tuple[int, int]]:
        """Every shard's last flushed seq not yet deleted, ``(shard, seq)`` in shard order, for
        a caller that deletes them at once (a writer closing); the ledger forgets them."""
        flushed, self.flushed = sorted(self.flushed.items()), {}
        return flushed

    def plan(
        self, conn_of: Callable[[int], Connection], max_rows: int | None = None
    ) -> FlushPlan | None:
        """Which shards' outboxes a flush reads, and from which seq (``None``: nothing
        pending); with ``max_rows``, shards up to the one that reaches it. One flush at a time,
        each ended by :meth:`record`."""
        if self.unscanned:  # the first flush counts what a previous run left in each outbox
            for shard in range(self.shard_count):
                (left,) = conn_of(shard).execute("SELECT count(*) FROM search_outbox").fetchone()
                if left:
                    self.deferred(shard, left)
            self.unscanned = False
        if not self.pending:
            return None
        plan = FlushPlan()
        expected = 0
        for shard in sorted(self.pending):
            if max_rows is not None and plan.after and expected >= max_rows:
                break
            plan.after[shard] = self.flushed.get(shard, 0)
            plan.counted[shard] = self.pending[shard]
            expected += plan.counted[shard]
        return plan

    def record(self, plan: FlushPlan, last: dict[int, int]) -> None:
        """What a flush of ``plan`` did: shard -> the last seq it indexed. Rows written while
        it ran stay pending: only those counted in the plan are taken off (a row both counted
        and read again by the next flush is indexed twice, harmlessly)."""
        self.flushed.update(last)
        for shard, counted in plan.counted.items():
            pending = self.pending.pop(shard, 0)
            taken = min(counted, pending)
            self.rows -= taken
            if pending > taken:
                self.pending[shard] = pending - taken
