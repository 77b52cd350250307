"""Workspace mirrors: a session's folder on two "hosts" (two folders) kept in step through one
store, on both engines (the s3 one against the test session's moto server)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_core.config.files import S3Settings
from agent_core.files import FileStore
from agent_core.files.local import LocalFileStore
from agent_core.files.mirror import WorkspaceMirror
from agent_core.files.s3 import S3FileStore
from tests.engines.s3 import MotoS3

PREFIX = "accounts/acct_a/sessions/sess_m"


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path, s3_server: MotoS3) -> Iterator[FileStore]:
    if request.param == "local":
        yield LocalFileStore(tmp_path / "store-home")
        return
    bucket = s3_server.new_bucket("mirror-contract")
    prefix = f"t{abs(hash(request.node.nodeid)) % 10**9}"
    yield S3FileStore(S3Settings(bucket=bucket, prefix=prefix), env=s3_server.env())


async def test_two_hosts_see_each_others_changes_and_only_changes_move(
    store: FileStore, tmp_path: Path
) -> None:
    a = WorkspaceMirror(store, PREFIX, tmp_path / "host-a")
    b = WorkspaceMirror(store, PREFIX, tmp_path / "host-b")
    assert await a.hydrate() == 0
    assert sorted(p.name for p in a.root.iterdir()) == ["input", "output", "scratchpad"]
    (a.root / "input" / "data.csv").write_bytes(b"x,y\n")
    (a.root / "output" / "deep").mkdir()
    (a.root / "output" / "deep" / "report.md").write_bytes(b"# one\n")
    (a.root / "scratchpad" / "gone.txt").write_bytes(b"bye")
    assert await a.sync() == 3
    assert await a.sync() == 0  # nothing changed: nothing sent
    # The same bytes written again (a new change time) are not sent either.
    (a.root / "input" / "data.csv").write_bytes(b"x,y\n")
    os.utime(a.root / "input" / "data.csv", ns=(1, 1))
    assert await a.sync() == 0
    # Another host's turn: it finds every earlier file, changes some.
    assert await b.hydrate() == 3
    assert (b.root / "output" / "deep" / "report.md").read_bytes() == b"# one\n"
    (b.root / "output" / "deep" / "report.md").write_bytes(b"# two\n")
    (b.root / "scratchpad" / "gone.txt").unlink()
    (b.root / "output" / "new.bin").write_bytes(os.urandom(1000))
    os.symlink("/etc/passwd", b.root / "output" / "link")  # a host fact: never mirrored
    assert await b.sync() == 3
    keys = sorted(o.key.removeprefix(PREFIX + "/") for o in await store.list(PREFIX, limit=100))
    assert keys == ["input/data.csv", "output/deep/report.md", "output/new.bin"]
    # Back on the first host: only what changed is fetched, what was removed is removed.
    assert await a.hydrate() == 2
    assert (a.root / "output" / "deep" / "report.md").read_bytes() == b"# two\n"
    assert not (a.root / "scratchpad" / "gone.txt").exists()
    assert (a.root / "output" / "new.bin").read_bytes() == (
        b.root / "output" / "new.bin"
    ).read_bytes()
    b.drop()
    assert not b.root.exists()
    assert await b.hydrate() == 3  # a later claim on that host starts from the store again
