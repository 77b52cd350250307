"""The search index's child process (started by ``index_process.IndexProcess``).

``python -m services.storage_writer.index_child <catalog> <shards> <log level> <log format>
<debug> <instance>``: one JSON request line a flush on standard input (``{"after": {shard:
seq}}``), one reply line on standard output (``{"last": {shard: seq}, "moved": n}`` or
``{"error": …}``), until its input closes.

A module of its own, importing only what a flush needs (SQLite, the index, logging): a writer
starts a child at its start and again after a child died, and Python's start-up with the
service's imports (asyncio, pydantic, the Redis client, Prometheus) cost ~0.2 s of CPU each time
against ~0.05 s with these (``tests/unit/storage_writer/test_index_child_imports.py`` keeps it
so).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
from pathlib import Path
from typing import Any

from agent_core.observability.logs import configure_logging
from services.storage_writer.schema import configure
from services.storage_writer.search_outbox import flush_outbox
from services.storage_writer.shards import ShardLayout

__all__ = ["main"]

log = logging.getLogger("soong.storage_writer")


class _Child:
    """The child's connections: the catalog's (to write the index), each shard's read-only."""

    def __init__(self, db_path: str, shard_count: int) -> None:
        self.layout = ShardLayout(Path(db_path), shard_count)
        self.catalog = self._open(self.layout.db_path, readonly=False)
        self.shards: dict[int, sqlite3.Connection] = {}

    @staticmethod
    def _open(path: Path, *, readonly: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None)
        configure(conn, readonly=readonly)
        if not readonly:  # the writer's checkpointer checkpoints the catalog as it does a shard
            conn.execute("PRAGMA wal_autocheckpoint=0")
        return conn

    def flush(self, after: dict[int, int]) -> tuple[dict[int, int], int]:
        shards: dict[int, tuple[sqlite3.Connection, int]] = {}
        for shard, seq in after.items():
            if shard not in self.shards:
                self.shards[shard] = self._open(self.layout.path(shard), readonly=True)
            shards[shard] = (self.shards[shard], seq)
        return flush_outbox(self.catalog, shards)

    def answer(self, line: bytes) -> dict[str, Any]:
        """The reply to one request line: ``{"after": {shard: seq}}``."""
        try:
            after = {int(k): int(v) for k, v in json.loads(line)["after"].items()}
            last, moved = self.flush(after)
        except (sqlite3.Error, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.exception("search index flush failed")
            return {"error": f"{type(exc).__name__}: {exc}"}
        return {"last": {str(k): v for k, v in last.items()}, "moved": moved}


def main(argv: list[str]) -> int:
    """The child: answer flush requests from standard input until it closes."""
    db_path, shards, level, fmt, debug, instance = argv
    configure_logging(
        level, "search_index", instance, "json" if fmt == "json" else "text", debug=debug == "1"
    )
    child = _Child(db_path, int(shards))
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        out.write(json.dumps(child.answer(line), separators=(",", ":")).encode() + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
