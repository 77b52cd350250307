"""A PostgreSQL connection that speaks the SQL the shared appliers and queries are written in.

The appliers (``services.storage_writer.commands`` and its ``apply_*`` modules) and the queries
are one copy for both backends: their logic (fencing, idempotency, refusals, transitions) is the
part worth keeping single. They are written against SQLite's ``sqlite3`` connection API and
dialect; :class:`PgConn` gives them that API over psycopg and rewrites the few constructs that
differ, each statement's rewrite computed once and cached:

- ``?`` placeholders become ``%s`` (a literal ``%`` is doubled);
- a session's tables ``"nodes_<id>"`` / ``"events_<id>"`` become the views ``session_nodes`` /
  ``session_events`` (see :mod:`.pg_schema`), the session named by setting
  ``soong.session_id`` before the statement (only when it changes; a rollback forgets it, as
  PostgreSQL undoes the setting with the transaction or savepoint); creating those tables is a
  no-op and dropping one deletes the session's rows;
- an insert into them returns the sequence number the trigger gave (``lastrowid``);
- ``BEGIN IMMEDIATE``, ``INSERT OR IGNORE``, ``IS NOT ?``, an ``ON CONFLICT`` without target and
  the JSON functions SQLite has and PostgreSQL spells otherwise (:data:`_FRAGMENTS`).

Values come back as SQLite gives them: times and days as ISO text, ``json`` columns as their
text, integral ``numeric`` sums as ``int``; rows index by position and by name, and ``dict(row)``
leaves out ``rowid`` as SQLite's ``SELECT *`` does. A unique or foreign-key violation is raised
as :class:`sqlite3.IntegrityError` (the appliers turn it into a ``conflict`` refusal).

With :attr:`PgConn.savepoints` off (the writer's first pass over a batch, see
:class:`.pg_store.PgWriter`) the shared writer's per-command ``SAVEPOINT``/``RELEASE`` are not
sent, and a ``ROLLBACK TO`` (a command was refused, or a statement failed) raises
:class:`SavepointNeeded` instead: the caller rolls the whole transaction back and applies the
batch again with savepoints.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Final, Literal

import psycopg
from psycopg.adapt import Buffer, Loader
from psycopg.pq import TransactionStatus
from psycopg.types.datetime import DateLoader, TimestamptzLoader
from psycopg.types.numeric import NumericLoader

__all__ = ["PgConn", "PgCursor", "PgRow", "SavepointNeeded", "connection_lost"]

_SESSION_TABLE: Final = re.compile(r'"(nodes|events)_(sess_[A-Za-z0-9_\-]+)"')
_VIEWS: Final = {"nodes": "session_nodes", "events": "session_events"}
_SEQ_OF: Final = {"session_nodes": "node_seq", "session_events": "seq"}
# SQLite spellings and their PostgreSQL equivalents, applied in order.
_FRAGMENTS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(r"^BEGIN IMMEDIATE$"), "BEGIN"),
    (re.compile(r"IS NOT \?"), "IS DISTINCT FROM ?"),
    # apply_runs.create_run: a key of the session's metadata, when it is an object
    (
        re.compile(
            r"CASE json_type\((\w+), '\$\.(\w+)'\) WHEN 'object' "
            r"THEN json_extract\(\1, '\$\.\2'\) END"
        ),
        r"CASE json_typeof(\1 -> '\2') WHEN 'object' THEN (\1 -> '\2')::text END",
    ),
    # apply_nodes.place_message: the queued message leaves the run's metadata
    (re.compile(r"json_remove\((\w+), '\$\.(\w+)'\)"), r"(\1::jsonb - '\2')::json"),
    # apply_end: usage totals are keyed by their primary key, and PostgreSQL wants the kept
    # row's columns named by their table where ``excluded`` is in scope too
    (
        re.compile(r"ON CONFLICT DO UPDATE SET"),
        "ON CONFLICT (account_id, day, model, session_id) DO UPDATE SET",
    ),
    (re.compile(r"(?<=[ ,])(\w+) = \1 \+ "), r"\1 = usage_totals.\1 + "),
)
_HIDDEN: Final = frozenset({"rowid"})
_OPEN: Final = frozenset(
    {TransactionStatus.ACTIVE, TransactionStatus.INTRANS, TransactionStatus.INERROR}
)


class SavepointNeeded(Exception):  # a request to the caller, not a failure
    """A ``ROLLBACK TO`` met with savepoints off: the batch must be applied again with them."""


# SQLSTATEs of a session the server ended: administrator or crash shutdown, a server that
# cannot take connections now (starting, stopping, in recovery); class 08 is a lost connection.
_ENDED_STATES: Final = frozenset({"57P01", "57P02", "57P03"})


def connection_lost(exc: BaseException, conn: PgConn | None) -> bool:
    """Whether ``exc`` means the connection (not the statement) failed: the server went away,
    ended the session or was unreachable. Such a failure says nothing about the commands that
    met it: the same batch on a new connection is the answer (it is idempotent)."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    if conn is not None and (conn.raw.broken or conn.raw.closed):
        return True
    state = exc.sqlstate or ""
    return state.startswith("08") or state in _ENDED_STATES


class _IsoTimestamptz(TimestamptzLoader):
    """``timestamptz`` as the ISO text SQLite holds (``2026-12-04T11:20:41.123456+00:00``)."""

    def load(self, data: Buffer) -> str:  # type: ignore[override]
        value: datetime = super().load(data)
        return value.astimezone(UTC).isoformat(timespec="microseconds")


class _IsoDate(DateLoader):
    def load(self, data: Buffer) -> str:  # type: ignore[override]
        value: date = super().load(data)
        return value.isoformat()


class _JsonText(Loader):
    """``json`` as its text: the appliers and the gateway parse it where they need to."""

    def load(self, data: Buffer) -> str:
        return bytes(data).decode()


class _IntegralNumeric(NumericLoader):
    """``numeric`` (what ``sum(bigint)`` gives) as ``int`` when integral, as SQLite's sums."""

    def load(self, data: Buffer) -> int | float:  # type: ignore[override]
        value = super().load(data)
        assert isinstance(value, Decimal)
        return int(value) if value == value.to_integral_value() else float(value)


class PgRow(tuple[Any, ...]):
    """A row by position (``row[0]``), by name (``row["status"]``) and as ``dict(row)``."""

    _names: tuple[str, ...]

    def __new__(cls, names: tuple[str, ...], values: Sequence[Any]) -> PgRow:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def keys(self) -> list[str]:
        """The column names, as :class:`sqlite3.Row`'s."""
        return list(self._names)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self._names.index(key))
        return super().__getitem__(key)


# A result set's columns as the shared code sees them: the indexes kept (``rowid`` hidden) and
# their names.
_Shape = tuple[list[int], tuple[str, ...]]


def _shape_of(cur: psycopg.Cursor[Any] | None) -> _Shape | None:
    """The shape of ``cur``'s result set; ``None`` without one."""
    if cur is None or cur.description is None:
        return None
    names = [c.name for c in cur.description]
    keep = [i for i, n in enumerate(names) if n not in _HIDDEN]
    return keep, tuple(names[i] for i in keep)


@dataclass
class _Statement:
    """A statement of the shared code's SQL as sent to PostgreSQL (cached per text)."""

    text: bytes  # bytes: the rewritten text as it is (no further ``%`` processing)
    returning: bool  # an insert into a session view: its sequence number comes back
    skip: bool  # not sent at all (creating a session's tables)
    rollback: bool  # ROLLBACK or ROLLBACK TO: the session setting made inside is undone
    # Its result set's shape once seen; ``None``: it has none (its cursor can be reused).
    shape: _Shape | None | Literal["unknown"] = "unknown"


class PgCursor:
    """The part of :class:`sqlite3.Cursor` the shared code uses."""

    def __init__(
        self,
        cur: psycopg.Cursor[Any] | None,
        lastrowid: int | None = None,
        *,
        shape: _Shape | None = None,
        rowcount: int = -1,
    ) -> None:
        """``cur`` with a result set to read (its ``shape``, when known), or ``None`` and what
        the statement reported (``lastrowid``, ``rowcount``)."""
        self._cur = cur
        self.lastrowid = lastrowid
        self._rowcount = rowcount
        if shape is None:
            shape = _shape_of(cur)
        self._keep: list[int] | None = None
        self._names: tuple[str, ...] = ()
        if shape is not None:
            self._keep, self._names = shape

    @property
    def description(self) -> list[tuple[str, None, None, None, None, None, None]]:
        return [(n, None, None, None, None, None, None) for n in self._names]

    @property
    def rowcount(self) -> int:
        return self._rowcount if self._cur is None else self._cur.rowcount

    def _row(self, values: Sequence[Any]) -> PgRow:
        keep = self._keep or []
        return PgRow(self._names, [values[i] for i in keep])

    def fetchone(self) -> PgRow | None:
        if self._cur is None or self._keep is None:
            return None
        values = self._cur.fetchone()
        return None if values is None else self._row(values)

    def fetchall(self) -> list[PgRow]:
        if self._cur is None or self._keep is None:
            return []
        return [self._row(v) for v in self._cur.fetchall()]

    def __iter__(self) -> Iterator[PgRow]:
        return iter(self.fetchall())


class PgConn:
    """One psycopg connection (autocommit: transactions are the caller's ``BEGIN``/``COMMIT``,
    as with ``sqlite3``'s ``isolation_level=None``). Not thread-safe: one thread uses it."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        conn.autocommit = True
        adapters = conn.adapters
        adapters.register_loader("timestamptz", _IsoTimestamptz)
        adapters.register_loader("date", _IsoDate)
        adapters.register_loader("json", _JsonText)
        adapters.register_loader("numeric", _IntegralNumeric)
        conn.execute("SET TIME ZONE 'UTC'")
        self.raw = conn
        # Off: SAVEPOINT and RELEASE are skipped and ROLLBACK TO raises SavepointNeeded.
        self.savepoints = True
        self._session: str | None = None
        self._sql: dict[str, _Statement] = {}
        # Reused for statements whose result is read at once (nothing to fetch, or a RETURNING
        # read here): making a psycopg cursor per statement costs more than running it.
        self._scratch: psycopg.Cursor[Any] | None = None

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (or failed and not yet rolled back); never on a lost
        connection, whose transaction the server has already dropped (a ``ROLLBACK`` there
        would only raise again and hide why it was lost)."""
        return self.raw.info.transaction_status in _OPEN

    def close(self) -> None:
        """Close the connection."""
        self.raw.close()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> PgCursor:
        """Run one statement of the shared code's SQL (see the module's docstring)."""
        if not self.savepoints:
            if sql.startswith(("SAVEPOINT ", "RELEASE ")):
                return PgCursor(None)
            if sql.startswith("ROLLBACK TO "):
                raise SavepointNeeded(sql)
        session = None
        match = _SESSION_TABLE.search(sql)
        if match is not None:
            session = match.group(2)
            sql = _SESSION_TABLE.sub(lambda m: _VIEWS[m.group(1)], sql)
        st = self._translate(sql)
        if st.skip:
            return PgCursor(None)
        if st.rollback:
            self._session = None  # the setting made inside is undone with it
        if session is not None and session != self._session:
            self._cursor().execute(b"SELECT set_config('soong.session_id', %s, false)", (session,))
            self._session = session
        reused = st.returning or st.shape is None
        cur = self._cursor() if reused else self.raw.cursor()
        try:
            cur.execute(st.text, tuple(params))
        except psycopg.IntegrityError as exc:
            raise sqlite3.IntegrityError(str(exc).strip()) from exc
        if st.returning:
            row = cur.fetchone()
            return PgCursor(None, None if row is None else int(row[0]))
        if st.shape == "unknown":
            st.shape = _shape_of(cur)
        if st.shape is None:
            return PgCursor(None, rowcount=cur.rowcount)
        return PgCursor(cur, shape=st.shape)

    def _cursor(self) -> psycopg.Cursor[Any]:
        if self._scratch is None:
            self._scratch = self.raw.cursor()
        return self._scratch

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per row (nothing for no rows)."""
        if not rows:
            return
        st = self._translate(sql)
        try:
            with self.raw.cursor() as cur:
                cur.executemany(st.text, [tuple(r) for r in rows])
        except psycopg.IntegrityError as exc:
            raise sqlite3.IntegrityError(str(exc).strip()) from exc

    def _translate(self, sql: str) -> _Statement:
        """A statement as sent to PostgreSQL, cached."""
        cached = self._sql.get(sql)
        if cached is not None:
            return cached
        text, returning, skip = sql, None, False
        head = " ".join(sql.split()[:3]).upper()
        if head.startswith("CREATE TABLE SESSION_"):
            skip = True  # a session's tables are the shared ones
        elif head.startswith("DROP TABLE SESSION_"):
            text = "DELETE FROM " + sql.split()[2]
        for pattern, replacement in _FRAGMENTS:
            text = pattern.sub(replacement, text)
        if text.startswith("INSERT OR IGNORE INTO"):
            text = "INSERT INTO" + text.removeprefix("INSERT OR IGNORE INTO")
            text += " ON CONFLICT DO NOTHING"
        for view, column in _SEQ_OF.items():
            if text.startswith(f"INSERT INTO {view} "):
                text += f" RETURNING {column}"
                returning = column
        text = text.replace("%", "%%").replace("?", "%s")
        rollback = text.lstrip().upper().startswith("ROLLBACK")
        st = _Statement(text.encode(), returning is not None, skip, rollback)
        self._sql[sql] = st
        return st
