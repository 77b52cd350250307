"""The memory files' engines: every test that asks for ``files`` runs once on the home's folders
(``local``) and once on a real S3-compatible server (moto, one per test session)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent_core.config.files import S3Settings
from agent_core.files import FileStore
from agent_core.files.local import LocalFileStore
from agent_core.files.s3 import S3FileStore
from tests.engines.s3 import MotoS3

BUCKET = "memory-files"
OpenFiles = Callable[[], FileStore]


@pytest.fixture(params=["local", "s3"])
def open_files(request: pytest.FixtureRequest, tmp_path: Path) -> OpenFiles:
    """Opens a client of one fresh store of the engine, as one more host would: each call is a
    client of its own (a process of its own) on the same files."""
    if request.param == "local":
        return lambda: LocalFileStore(tmp_path)
    server: MotoS3 = request.getfixturevalue("s3_server")
    bucket = server.new_bucket(BUCKET)
    prefix = f"t{abs(hash(request.node.nodeid)) % 10**9}"
    settings = S3Settings(bucket=bucket, prefix=prefix)
    return lambda: S3FileStore(settings, env=server.env())


@pytest.fixture
def files(open_files: OpenFiles) -> FileStore:
    """One client of the store ``open_files`` opens."""
    return open_files()
