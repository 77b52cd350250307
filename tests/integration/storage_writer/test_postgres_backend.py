"""The PostgreSQL backend's start-up against a real private server (tests/engines/postgres.py):
its checks, its schema and migrations, ``soong-agent migrate``."""

from __future__ import annotations

import os
import secrets
import threading
from pathlib import Path

import psycopg
import pytest

from agent_core.cli import main
from agent_core.errors import ConfigError, StorageError
from agent_core.service.valkey import find_free_port
from services.storage_writer.backends.pg_connect import check_server, connect, resolve_dsn
from services.storage_writer.backends.pg_schema import MIGRATIONS
from services.storage_writer.backends.postgres import migrate_database
from tests.engines.postgres import PostgresCluster, postgres_cluster, postgres_dsn

__all__ = ["postgres_cluster", "postgres_dsn"]

NEWEST = max(v for v, _ in MIGRATIONS)


def _fresh(cluster: PostgresCluster) -> str:
    return cluster.create_database("mig_" + secrets.token_hex(5))


def test_private_cluster_is_15_or_later_and_runs_unprivileged(
    postgres_cluster: PostgresCluster, postgres_dsn: str
) -> None:
    assert check_server(postgres_dsn) >= 150000
    data_owner = postgres_cluster.data_dir.stat().st_uid
    assert data_owner != 0 or os.geteuid() != 0  # root never owns (so never runs) the server


def test_migrations_create_shared_tables_once(postgres_cluster: PostgresCluster) -> None:
    dsn = _fresh(postgres_cluster)
    assert migrate_database(dsn, partitions=4) == [v for v, _ in MIGRATIONS]
    assert migrate_database(dsn, partitions=8) == []  # nothing twice; the layout is kept
    with psycopg.connect(dsn) as conn:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        }
        (partitions,) = conn.execute("SELECT partitions FROM layout").fetchone() or (None,)
        nodes_key = conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'nodes'::regclass "
            "AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)"
        ).fetchall()
    # Shared tables keyed by session: no per-session tables as in SQLite's shards.
    assert {"sessions", "nodes", "events", "runs", "command_receipts", "usage_totals"} <= tables
    assert not any(t.startswith(("nodes_", "events_")) for t in tables)
    assert [name for (name,) in nodes_key] == ["session_id", "node_seq"]
    assert partitions == 4


def test_two_writers_migrating_at_once_apply_each_version_once(
    postgres_cluster: PostgresCluster,
) -> None:
    dsn = _fresh(postgres_cluster)
    results: list[list[int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def run() -> None:
        start.wait()
        try:
            results.append(migrate_database(dsn, partitions=2))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(v for applied in results for v in applied) == [v for v, _ in MIGRATIONS]
    with psycopg.connect(dsn) as conn:
        (count,) = conn.execute("SELECT count(*) FROM schema_migrations").fetchone() or (0,)
    assert count == len(MIGRATIONS)


def test_a_database_newer_than_the_writer_is_refused(postgres_cluster: PostgresCluster) -> None:
    dsn = _fresh(postgres_cluster)
    migrate_database(dsn, partitions=1)
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (NEWEST + 1,))
    with pytest.raises(StorageError) as caught:
        migrate_database(dsn, partitions=1)
    assert caught.value.code == "schema_too_new"


def test_wrong_password_is_auth_refused_without_the_password(
    postgres_cluster: PostgresCluster,
) -> None:
    wrong = "not-the-password-" + secrets.token_hex(4)
    with pytest.raises(StorageError) as caught:
        check_server(postgres_cluster.dsn(password=wrong))
    assert caught.value.code == "postgres_auth_refused"
    assert wrong not in str(caught.value.to_payload())
    assert f"127.0.0.1:{postgres_cluster.port}" in caught.value.message


def _keepalive_settings(dsn: str) -> tuple[str, ...]:
    """The server's keepalive settings for a connection the writer opened with ``dsn``."""
    with connect(dsn, autocommit=True) as conn:
        names = ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count")
        shown = tuple(str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names)  # type: ignore[index]
        timeout = str(conn.execute("SHOW tcp_user_timeout").fetchone()[0])  # type: ignore[index]
        client = conn.info.get_parameters()
    return (*shown, timeout, client.get("keepalives_idle", ""), client.get("tcp_user_timeout", ""))


def test_a_writer_connection_asks_both_ends_to_notice_a_silent_peer(postgres_dsn: str) -> None:
    """A host that dies without a word (no FIN, no RST) is noticed in about 30 s, not the
    kernel's two hours: by the writer (libpq's keepalives and ``tcp_user_timeout``) and by the
    server, whose backend of a dead writer holds a partition's lock until it ends."""
    assert _keepalive_settings(postgres_dsn) == ("10", "5", "3", "30000", "10", "30000")
    # What the DSN says wins, on both ends; keepalives=0 turns them off.
    sep = "&" if "?" in postgres_dsn else "?"
    own = _keepalive_settings(f"{postgres_dsn}{sep}keepalives_idle=2&tcp_user_timeout=4000")
    assert own == ("2", "5", "3", "4000", "2", "4000")
    with psycopg.connect(postgres_dsn) as plain:  # the server's own (the kernel's) defaults
        names = ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count")
        kernel = tuple(str(plain.execute(f"SHOW {n}").fetchone()[0]) for n in names)  # type: ignore[index]
    assert kernel[0] != "10"
    assert _keepalive_settings(f"{postgres_dsn}{sep}keepalives=0")[:4] == (*kernel, "0")


def test_no_server_on_the_port_is_unreachable() -> None:
    dsn = f"postgresql://soong:secret@127.0.0.1:{find_free_port()}/soong"
    with pytest.raises(StorageError) as caught:
        check_server(dsn)
    assert caught.value.code == "postgres_unreachable"
    assert caught.value.retryable
    assert "secret" not in caught.value.message


def test_no_dsn_at_all_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_dsn({})
    assert caught.value.code == "postgres_dsn_missing"
    assert resolve_dsn({"PGHOST": "db"}) == ""  # libpq's own variables name the server


def _migrate_cli(
    home: Path, dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """``soong-agent migrate`` in this process (the command line's own entry point)."""
    monkeypatch.setenv("SOONG_AGENT_HOME", str(home))
    monkeypatch.setenv("SOONG_STORAGE_BACKEND", "postgres")
    monkeypatch.setenv("SOONG_POSTGRES_DSN", dsn)
    code = main(["migrate"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_migrate_command(
    postgres_cluster: PostgresCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dsn = _fresh(postgres_cluster)
    code, out, err = _migrate_cli(tmp_path, dsn, monkeypatch, capsys)
    assert code == 0, err
    assert f"applied schema version {NEWEST}" in out
    code, out, err = _migrate_cli(tmp_path, dsn, monkeypatch, capsys)
    assert code == 0, err
    assert "the schema is current" in out
    code, out, err = _migrate_cli(
        tmp_path, postgres_cluster.dsn(password="wrong"), monkeypatch, capsys
    )
    assert code == 2
    assert err.startswith("error: ")
    assert err.strip().endswith("[postgres_auth_refused]")
    assert "Traceback" not in err and "wrong" not in err
