"""What a restore loads from a backup's bus dump: the bus's own keys, never what the database
copy decides (the run queue, attempt counters, in-flight runs' events) or what live processes
exchanged (a command replayed past the copy would create a run nobody queues)."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

from services.stack.backup import _loadable

NS = "soong"


def _line(key: str, value: bytes = b"v", ttl_ms: int = 0) -> str:
    record = {
        "key": base64.b64encode(key.encode()).decode(),
        "ttl_ms": ttl_ms,
        "value": base64.b64encode(value).decode(),
    }
    return json.dumps(record)


def _database(tmp_path: Path, runs: dict[str, str]) -> Path:
    """A catalog and one shard holding ``runs`` (run id → status), laid out as the writer's."""
    db = tmp_path / "soong.sqlite"
    sqlite3.connect(db).close()
    shards = tmp_path / "soong.sqlite.shards"
    shards.mkdir()
    conn = sqlite3.connect(shards / "00.sqlite")
    conn.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, status TEXT NOT NULL)")
    conn.executemany("INSERT INTO runs VALUES (?, ?)", runs.items())
    conn.commit()
    conn.close()
    return db


def test_the_bus_own_keys_load_and_what_the_database_decides_does_not(tmp_path: Path) -> None:
    db = _database(tmp_path, {"run_done": "completed", "run_live": "running", "run_q": "queued"})
    kept = [
        f"{NS}:apikeys",
        f"{NS}:apikeys:used",
        f"{NS}:dlq",
        f"{NS}:memory:pending:acct_1",
        f"{NS}:memory:interactions",
        f"{NS}:permissions:{{sess_1}}",
        f"{NS}:cancel:run_live",
        f"{NS}:{{auth}}:apikeys",  # today's spellings (Cluster hash tags) beside the older ones
        f"{NS}:{{auth}}:apikeys:used",
        f"{NS}:memory:pending:{{memory-3}}:acct_1",
        f"{NS}:cancel:{{run_live}}",
        f"{NS}:events:{{sess_1}}:run_done",
    ]
    left_out = [
        f"{NS}:fifo:{{sess_1}}",
        f"{NS}:processing:{{sess_1}}",
        f"{NS}:lease:{{sess_1}}",
        f"{NS}:sessions:due",
        f"{NS}:fifo:{{lanes-1}}:sess_1",
        f"{NS}:processing:{{lanes-1}}:sess_1",
        f"{NS}:lease:{{lanes-1}}:sess_1",
        f"{NS}:lanes:due:{{lanes-1}}",
        f"{NS}:attempt:{{run_q}}",
        f"{NS}:{{auth}}:ratelimit:key_1",
        f"{NS}:memory:lock:{{memory-3}}:acct_1",
        f"{NS}:sessions:pending",
        f"{NS}:runs",
        f"{NS}:attempt:run_q",
        f"{NS}:storage:commands",
        f"{NS}:storage:queries",
        f"{NS}:tasks:commands",
        f"{NS}:memory:queries",
        f"{NS}:memory:lock:acct_1",
        f"{NS}:reply:gateway-0",
        f"{NS}:health:run_worker",
        f"{NS}:sse:key_1",
        f"{NS}:sse-gateway:gateway-0:ab",
        f"{NS}:ratelimit:key_1",
        f"{NS}:gateway:wake:hub",
        f"{NS}:events:{{sess_1}}:run_live",  # in flight at the copy: rebuilt by its next attempt
        f"{NS}:events:{{sess_1}}:run_q",
        f"{NS}:events:{{sess_1}}:run_after",  # created after the copy: not in the backup at all
    ]
    lines = [_line(k, value=k.encode(), ttl_ms=i) for i, k in enumerate(kept + left_out)]
    loaded = _loadable(lines, NS, db)
    assert sorted(k.decode() for k, _, _ in loaded) == sorted(kept)
    for key, ttl_ms, value in loaded:  # each as dumped
        assert value == key and ttl_ms == (kept + left_out).index(key.decode())


def test_another_namespace_prefix_is_not_mistaken_for_ours(tmp_path: Path) -> None:
    db = _database(tmp_path, {})
    lines = [_line("other:storage:commands"), _line(f"{NS}x:attempt:run_1")]
    assert [k for k, _, _ in _loadable(lines, NS, db)] == [
        b"other:storage:commands",
        f"{NS}x:attempt:run_1".encode(),
    ]
