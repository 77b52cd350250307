"""PostgreSQL's writer applies a batch without per-command savepoints when no command is refused,
and applies it again with them when one is: the refused command leaves nothing, the others stay.

Which pass wrote a row shows in its ``xmin``: rows written under a savepoint carry that
subtransaction's id, so one batch's commands have one ``xmin`` without savepoints and one each
with them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from services.storage_writer.backends.pg_store import PgWriter
from services.storage_writer.backends.postgres import open_connection
from tests.unit.storage_writer.conftest import empty_postgres
from tests.unit.storage_writer.factories import append_node, create_session


@pytest.fixture
def pg(postgres_dsn: str, tmp_path: Path) -> Iterator[tuple[PgWriter, str]]:
    empty_postgres(postgres_dsn)
    w = PgWriter(lambda: open_connection(postgres_dsn), tmp_path / "artifacts", 1024)
    yield w, postgres_dsn
    w.close()


def _rows(dsn: str, session_id: str) -> list[tuple[str, int, str]]:
    """``(node_id, node_seq, xmin)`` of the session's nodes, by sequence number."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT node_id, node_seq, xmin::text FROM nodes WHERE session_id = %s "
            "ORDER BY node_seq",
            (session_id,),
        ).fetchall()
    return [(str(n), int(s), str(x)) for n, s, x in rows]


def test_a_batch_without_refusals_is_one_transaction_without_savepoints(
    pg: tuple[PgWriter, str],
) -> None:
    writer, dsn = pg
    s = create_session()
    writer.apply_batch([s])
    cmds = [append_node(s) for _ in range(20)]
    receipts = writer.apply_batch(cmds)
    assert all(r.ok for r in receipts)
    rows = _rows(dsn, s.session_id)
    assert [n for n, _, _ in rows] == [c.node.node_id for c in cmds]
    assert len({x for _, _, x in rows}) == 1  # no subtransaction per command


def test_a_refused_command_mid_batch_leaves_nothing_and_the_others_stay(
    pg: tuple[PgWriter, str],
) -> None:
    writer, dsn = pg
    s = create_session()
    writer.apply_batch([s])
    first = append_node(s)
    # Its node is new but its event id is the first's: refused at the event's insert, after
    # its node was written.
    clash = append_node(s)
    clash = clash.model_copy(
        update={"event": clash.event.model_copy(update={"event_id": first.event.event_id})}
    )
    last = append_node(s)
    receipts = writer.apply_batch([first, clash, last])
    assert [r.ok for r in receipts] == [True, False, True]
    assert receipts[1].error is not None and receipts[1].error.code == "conflict"
    rows = _rows(dsn, s.session_id)
    assert [n for n, _, _ in rows] == [first.node.node_id, last.node.node_id]
    assert [seq for _, seq, _ in rows] == [1, 2]
    assert [r.result["node_seq"] for r in (receipts[0], receipts[2])] == [1, 2]
    assert len({x for _, _, x in rows}) == 2  # applied again, a savepoint per command
    # The next clean batch goes without savepoints again.
    more = [append_node(s) for _ in range(3)]
    assert all(r.ok for r in writer.apply_batch(more))
    assert len({x for _, _, x in _rows(dsn, s.session_id)[2:]}) == 1
