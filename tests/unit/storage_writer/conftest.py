"""A writer on a fresh database with a few shards (real SQLite files in tmp_path)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.storage_writer.queries import QueryEngine
from services.storage_writer.shards import open_catalog
from services.storage_writer.writer import Writer


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    """A writer over 4 shards with a 1 KiB json-artifact threshold."""
    layout = open_catalog(tmp_path / "sessions.sqlite", shard_count=4)
    w = Writer(layout, tmp_path / "artifacts", 1024)
    yield w
    w.close()


@pytest.fixture
def engine(writer: Writer) -> Iterator[QueryEngine]:
    """Read-only queries over the writer's files."""
    e = QueryEngine(writer.layout)
    yield e
    e.close()
