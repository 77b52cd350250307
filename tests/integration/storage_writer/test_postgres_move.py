"""``soong-agent migrate-data``: a SQLite home with 1,000 sessions moves into PostgreSQL, and
every query answers the same for every session before (SQLite) and after (PostgreSQL).

The home is built through the SQLite backend's writer in this process, many sessions to a batch
(not through the bus: the move is under test, not the stack), and PostgreSQL's answers are asked
on a few connections at once; the module shares the test process's PostgreSQL cluster."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent_core.bus.contracts.assistants import CreateAssistant, ListAssistants
from agent_core.bus.contracts.storage import (
    DeleteSession,
    GetActivePath,
    GetSession,
    GetSessionUsage,
    GetSessionWithUsage,
    GetTree,
    GetUsage,
    ListAgents,
    ListArtifacts,
    ListAuditEvents,
    ListEvents,
    ListNodes,
    ListRuns,
    ListSessions,
    SearchSessions,
    StorageQuery,
)
from agent_core.cli import main
from agent_core.errors import StorageError
from agent_core.ids import new_id
from agent_core.types.api import AssistantDefinition
from agent_core.types.protocol import JsonBlock, TextBlock
from services.storage_writer.backends.move import move_home
from services.storage_writer.backends.pg_store import PgQueryEngine
from services.storage_writer.backends.postgres import migrate_database, open_connection
from services.storage_writer.queries import QueryEngine
from services.storage_writer.shards import open_catalog
from services.storage_writer.writer import Writer
from tests.engines.postgres import PostgresCluster, postgres_cluster
from tests.unit.storage_writer.factories import (
    append_node,
    claim_run,
    create_run,
    create_session,
    end_run,
)

__all__ = ["postgres_cluster"]

SESSIONS = 1000
ACCOUNTS = ("acct_a", "acct_b", "acct_c")
SESSIONS_PER_BATCH = 50  # one group commit for many sessions: the home is built in seconds
READERS = 4  # PostgreSQL connections answering at once (each query waits on a round trip)


def _fill(writer: Writer) -> list[str]:
    """Sessions of three accounts: titled or not, a branch, runs ended with usage, a large
    JSON block moved to an artifact, named agents, and one deleted session (its audit row)."""
    sids = []
    commands: list[Any] = []
    for i in range(SESSIONS):
        account = ACCOUNTS[i % len(ACCOUNTS)]
        s = create_session(account=account)
        if i % 2:
            s = s.model_copy(update={"metadata": {"title": f"Café plan {i}", "n": i}})
        root = append_node(s, content=[TextBlock(text=f"deploy the thing {i}")])
        branch = append_node(s, parent_id=root.node.node_id, set_active=True)
        run = create_run(s)
        claim = claim_run(s, run.run_id)
        end = end_run(s, run.run_id, answer=f"done {i}", parent_id=branch.node.node_id)
        commands += [s, root, branch, run, claim, end]
        if i % 10 == 0:
            commands.append(append_node(s, content=[JsonBlock(data={"rows": list(range(400))})]))
        sids.append(s.session_id)
        if len(sids) % SESSIONS_PER_BATCH == 0 or i == SESSIONS - 1:
            receipts = writer.apply_batch(commands)
            assert all(r.ok for r in receipts), [r.error for r in receipts if not r.ok]
            commands = []
    for account in ACCOUNTS:
        made = CreateAssistant(
            command_id=new_id("cmd"),
            account_id=account,
            assistant_id=new_id("asst"),
            name="reviewer",
            definition=AssistantDefinition.model_validate({"instructions": "review"}),
        )
        assert writer.apply_batch([made])[0].ok
    gone = sids.pop()
    owner = ACCOUNTS[(SESSIONS - 1) % len(ACCOUNTS)]
    delete = DeleteSession(command_id=new_id("cmd"), session_id=gone, account_id=owner)
    assert writer.apply_batch([delete])[0].ok
    return sids


def _queries(sid: str) -> list[StorageQuery]:
    return [
        GetSession(session_id=sid),
        GetActivePath(session_id=sid),
        GetTree(session_id=sid),
        ListNodes(session_id=sid),
        ListEvents(session_id=sid),
        ListRuns(session_id=sid),
        ListAgents(session_id=sid),
        ListArtifacts(session_id=sid),
        GetSessionUsage(session_id=sid),
        GetSessionWithUsage(session_id=sid),
    ]


def _account_queries() -> list[Any]:
    out: list[Any] = []
    for account in ACCOUNTS:
        out += [
            ListSessions(account_id=account, limit=200),
            GetUsage(account_id=account),
            SearchSessions(account_id=account, q="cafe"),
            SearchSessions(account_id=account, q="deplo"),
            ListAuditEvents(account_id=account),
            ListAssistants(account_id=account),
        ]
    return out


def _answers(engine: QueryEngine, sids: list[str]) -> list[Any]:
    queries = [q for sid in sids for q in _queries(sid)] + _account_queries()
    return [engine.answer(q).model_dump() for q in queries]


def _answers_at_once(open_engine: Callable[[], QueryEngine], sids: list[str]) -> list[Any]:
    """:func:`_answers`, the sessions split over :data:`READERS` engines on threads of their
    own (an engine is used by one thread), in the same order."""
    step = -(-len(sids) // READERS)
    parts = [sids[i : i + step] for i in range(0, len(sids), step)]

    def answer(part: list[str]) -> list[Any]:
        engine = open_engine()
        try:
            return [engine.answer(q).model_dump() for sid in part for q in _queries(sid)]
        finally:
            engine.close()

    with ThreadPoolExecutor(READERS) as pool:
        answers = [a for chunk in pool.map(answer, parts) for a in chunk]
    engine = open_engine()
    try:
        return answers + [engine.answer(q).model_dump() for q in _account_queries()]
    finally:
        engine.close()


def test_a_home_moves_and_every_session_answers_the_same(
    postgres_cluster: PostgresCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "sessions.sqlite"
    writer = Writer(open_catalog(db, shard_count=8), tmp_path / "artifacts", 1024)
    try:
        sids = _fill(writer)
    finally:
        writer.close()
    sqlite_engine = QueryEngine(open_catalog(db))
    try:
        before = _answers(sqlite_engine, sids)
    finally:
        sqlite_engine.close()
    assert all(answer["ok"] for answer in before)
    assert any(answer["data"] for answer in before[-6 * len(ACCOUNTS) :])  # searches found

    dsn = postgres_cluster.create_database("move_" + new_id("x")[-8:])
    monkeypatch.setenv("SOONG_AGENT_HOME", str(tmp_path))
    monkeypatch.setenv("SOONG_STORAGE_BACKEND", "postgres")
    monkeypatch.setenv("SOONG_POSTGRES_DSN", dsn)
    assert main(["migrate-data"]) == 0  # the command line's own entry point, in this process
    printed = capsys.readouterr().out
    assert f"moved {SESSIONS - 1} sessions" in printed
    assert "nodes: " in printed and "(same in both)" in printed

    after = _answers_at_once(lambda: PgQueryEngine(lambda: open_connection(dsn)), sids)
    assert len(after) == len(before) == len(_queries(sids[0])) * (SESSIONS - 1) + 6 * len(ACCOUNTS)
    assert after == before

    pg = open_connection(dsn)
    try:
        with pytest.raises(StorageError) as caught:  # a second move is refused, not merged
            move_home(db, pg)
    finally:
        pg.close()
    assert caught.value.code == "target_not_empty"


def test_a_difference_rolls_the_whole_move_back(
    postgres_cluster: PostgresCluster, tmp_path: Path
) -> None:
    db = tmp_path / "sessions.sqlite"
    writer = Writer(open_catalog(db, shard_count=2), tmp_path / "artifacts", 1024)
    try:
        s = create_session()
        assert all(r.ok for r in writer.apply_batch([s, append_node(s)]))
    finally:
        writer.close()
    dsn = postgres_cluster.create_database("move_" + new_id("x")[-8:])
    migrate_database(dsn, partitions=1)
    with psycopg.connect(dsn, autocommit=True) as conn:  # a trigger that alters what is copied
        conn.execute(
            "CREATE FUNCTION shout() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN NEW.cwd := upper(NEW.cwd); RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER shout BEFORE INSERT ON sessions FOR EACH ROW EXECUTE FUNCTION shout()"
        )
    pg = open_connection(dsn)
    try:
        with pytest.raises(StorageError) as caught:
            move_home(db, pg)
        assert caught.value.code == "move_mismatch"
        assert caught.value.details["table"] == "sessions"
        assert pg.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
        assert pg.execute("SELECT count(*) FROM nodes").fetchone() == (0,)
    finally:
        pg.close()
