"""The file store port against both engines: the local layout and a real S3-compatible server
(moto, one per test session). Each test runs once per engine on the same contract."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_core.config import load_settings
from agent_core.config.files import FileStoreSettings, S3Settings
from agent_core.errors import ConfigError
from agent_core.files import (
    FileStore,
    FileStoreError,
    VersionConflict,
    open_file_store,
    put_if,
    read_versioned,
)
from agent_core.files.local import LocalFileStore
from agent_core.files.s3 import S3FileStore
from tests.engines.s3 import MotoS3

BUCKET = "store-contract"
SESSION = "accounts/acct_a/sessions/sess_1"


@pytest.fixture(scope="module")
def bucket(s3_server: MotoS3) -> str:
    return s3_server.new_bucket(BUCKET)


@pytest.fixture(params=["local", "s3"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, s3_server: MotoS3, bucket: str
) -> Iterator[FileStore]:
    """A fresh store of each engine (the s3 one under a prefix of its own per test)."""
    if request.param == "local":
        yield LocalFileStore(tmp_path)
        return
    prefix = f"t{abs(hash(request.node.nodeid)) % 10**9}"
    yield S3FileStore(S3Settings(bucket=bucket, prefix=prefix), env=s3_server.env())


async def _chunks(*parts: bytes, fail_after: int | None = None) -> AsyncIterator[bytes]:
    for i, part in enumerate(parts):
        if fail_after is not None and i == fail_after:
            raise ConnectionResetError("the client went away")
        yield part


async def test_put_get_head_list_delete(store: FileStore) -> None:
    etag = await store.put(f"{SESSION}/input/a.csv", b"x,y\n")
    assert etag
    assert await store.get(f"{SESSION}/input/a.csv") == (b"x,y\n", etag)
    await store.put(f"{SESSION}/output/deep/r.md", b"# r\n")
    await store.put("artifacts/sess_1/artifact_1.json", b"{}")
    head = await store.head(f"{SESSION}/output/deep/r.md")
    assert head is not None and head.size == 4
    assert await store.head(f"{SESSION}/output/none.md") is None
    listed = await store.list(SESSION, limit=10)
    assert [(o.key, o.size) for o in listed] == [
        (f"{SESSION}/input/a.csv", 4),
        (f"{SESSION}/output/deep/r.md", 4),
    ]
    assert [o.key for o in await store.list(SESSION, limit=1)] == [f"{SESSION}/input/a.csv"]
    assert await store.list("accounts/acct_a/sessions/other", limit=10) == []
    download = await store.open(f"{SESSION}/output/deep/r.md")
    assert download.size == 4 and b"".join([c async for c in download.chunks]) == b"# r\n"
    await store.delete([f"{SESSION}/input/a.csv", f"{SESSION}/input/never.csv"])
    assert [o.key for o in await store.list(SESSION, limit=10)] == [f"{SESSION}/output/deep/r.md"]
    await store.delete_prefix(SESSION)
    assert await store.list(SESSION, limit=10) == []
    assert (await store.get("artifacts/sess_1/artifact_1.json"))[0] == b"{}"
    with pytest.raises(FileStoreError) as missing:
        await store.open(f"{SESSION}/output/deep/r.md")
    assert missing.value.code == "file_not_found"


async def test_conditional_writes(store: FileStore) -> None:
    key = f"{SESSION}/memory/MEMORY.md"
    first = await store.put(key, b"one", if_absent=True)
    with pytest.raises(FileStoreError) as exists:
        await store.put(key, b"two", if_absent=True)
    assert exists.value.code == "file_changed"
    second = await store.put(key, b"two", if_match=first)
    assert second != first
    with pytest.raises(FileStoreError) as stale:  # an edit made on the old version loses
        await store.put(key, b"three", if_match=first)
    assert stale.value.code == "file_changed"
    assert (await store.get(key))[0] == b"two"


RACE_ROUNDS = 20


async def test_of_writes_racing_over_one_version_exactly_one_wins(store: FileStore) -> None:
    # What appends on an object store rely on (a rewrite over the version read, retried when
    # another writer got there first): S3 refuses every racing write but one with 412.
    # Rounds: on a server that checks and writes apart, two racers pass together only now and
    # then (how moto's check-then-write showed: one CI run in many lost an appended line).
    key = f"{SESSION}/memory/race.md"
    version = await store.put(key, b"v0", if_absent=True)
    for r in range(RACE_ROUNDS):
        outcomes = await asyncio.gather(
            *(store.put(key, f"{r}.{i}".encode(), if_match=version) for i in range(16)),
            return_exceptions=True,
        )
        won = [o for o in outcomes if isinstance(o, str)]
        lost = [o for o in outcomes if isinstance(o, FileStoreError) and o.code == "file_changed"]
        assert (len(won), len(lost)) == (1, 15), (r, outcomes)
        version = won[0]
        assert (await store.get(key))[1] == version


async def test_append_lines_grows_a_log_and_cuts_a_torn_tail(store: FileStore) -> None:
    key = "accounts/acct_a/memory/changes.jsonl"
    await store.append_lines(key, b"1\n")  # creates it
    first = (await store.get(key))[1]
    await store.append_lines(key, b"2\n3\n")
    data, second = await store.get(key)
    assert data == b"1\n2\n3\n" and second != first
    await store.put(key, b'1\n2\n{"torn')  # a writer cut short in its line
    await store.append_lines(key, b"4\n")
    assert (await store.get(key))[0] == b"1\n2\n4\n"
    await store.put(key, b"no newline at all")
    await store.append_lines(key, b"5\n")
    assert (await store.get(key))[0] == b"5\n"
    # Appends racing on one key all land, each line whole (on S3, rewrites that lost retry).
    await asyncio.gather(*(store.append_lines(key, f"r{i}\n".encode()) for i in range(8)))
    lines = (await store.get(key))[0].decode().splitlines()
    assert lines[0] == "5" and sorted(lines[1:]) == [f"r{i}" for i in range(8)]
    if store.engine == "local":  # (an object store has no folders)
        with pytest.raises(FileStoreError) as folder:
            await store.append_lines("accounts/acct_a", b"x\n")
        assert folder.value.code == "file_is_a_directory"


async def test_an_unsynced_put_is_read_back(store: FileStore) -> None:
    tag = await store.put("accounts/acct_a/memory/.versions/user/ab.md", b"v1", sync=False)
    assert await store.get("accounts/acct_a/memory/.versions/user/ab.md") == (b"v1", tag)


async def test_get_many_reads_in_order_and_names_the_missing(store: FileStore) -> None:
    base = "accounts/acct_a/memory"
    user = await store.put(f"{base}/user.md", b"- dates as YYYY-MM-DD\n")
    skill = await store.put(f"{base}/skills/report.md", b"- one page\n")
    keys = [f"{base}/skills/report.md", f"{base}/skills/chart.md", f"{base}/user.md"]
    assert await store.get_many(keys) == [
        (b"- one page\n", skill),
        None,
        (b"- dates as YYYY-MM-DD\n", user),
    ]
    assert await store.get_many([f"accounts/acct_b/memory/{n}" for n in ("a.md", "b.md")]) == [
        None,
        None,
    ]
    assert await store.get_many([]) == []
    with pytest.raises(FileStoreError) as bad:  # a bad key is refused, not read as missing
        await store.get_many([f"{base}/user.md", "../x"])
    assert bad.value.code == "invalid_key"


async def test_put_if_is_a_typed_compare_and_swap(store: FileStore) -> None:
    key = f"{SESSION}/memory/notes.md"
    assert await read_versioned(store, key) == (None, None)
    first = await put_if(store, key, b"aaaa", None)  # None: only where there is none
    with pytest.raises(VersionConflict):
        await put_if(store, key, b"bbbb", None)
    data, version = await read_versioned(store, key)
    assert (data, version) == (b"aaaa", first)
    # Writers that read one version: the first wins, the others learn it, typed.
    await put_if(store, key, b"bbbb", version)
    for late in (b"cccc", b"dddd"):
        with pytest.raises(VersionConflict) as lost:
            await put_if(store, key, late, version)
        assert lost.value.code == "file_changed" and isinstance(lost.value, FileStoreError)
    assert (await store.get(key))[0] == b"bbbb"


async def test_upload_streams_and_a_cut_upload_leaves_nothing(store: FileStore) -> None:
    key = f"{SESSION}/input/big.bin"
    size = await store.upload(key, _chunks(b"a" * 70_000, b"b" * 10))
    assert size == 70_010 and (await store.get(key))[0] == b"a" * 70_000 + b"b" * 10
    with pytest.raises(ConnectionResetError):
        await store.upload(f"{SESSION}/input/cut.bin", _chunks(b"x", b"y", fail_after=1))
    assert await store.head(f"{SESSION}/input/cut.bin") is None
    assert [o.key for o in await store.list(f"{SESSION}/input", limit=10)] == [key]


def test_put_blocking_is_durable_for_the_writer_thread(store: FileStore) -> None:
    store.put_blocking("artifacts/sess_2/artifact_x.json", b'{"a":1}')
    assert asyncio.run(store.get("artifacts/sess_2/artifact_x.json"))[0] == b'{"a":1}'


async def test_keys_never_climb_out(store: FileStore) -> None:
    for key in ("../x", "a/../../x", "/etc/passwd", "a//b", ""):
        with pytest.raises(FileStoreError) as bad:
            await store.put(key, b"x")
        assert bad.value.code == "invalid_key"


async def test_local_store_follows_no_symlink_out_of_a_session(tmp_path: Path) -> None:
    store = LocalFileStore(tmp_path)
    await store.put(f"{SESSION}/output/ok.txt", b"ok")
    (tmp_path / "secret.txt").write_text("host file")
    (tmp_path / SESSION / "output" / "escape").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(Exception) as escaped:
        await store.get(f"{SESSION}/output/escape")
    assert getattr(escaped.value, "code", "") == "path_symlink_escape"


# ------------------------------------------------------------------ start-up checks (s3)


async def test_start_up_check_names_what_is_wrong(
    tmp_path: Path, s3_server: MotoS3, bucket: str
) -> None:
    good = s3_server.env()
    await S3FileStore(S3Settings(bucket=bucket), env=good).check()
    cases = {
        "files_bucket_missing": (S3Settings(bucket="no-such-bucket"), good),
        "files_credentials_refused": (
            S3Settings(bucket=bucket),
            {**good, "AWS_SECRET_ACCESS_KEY": "wrong", "AWS_ACCESS_KEY_ID": "AKIAWRONG"},
        ),
        "files_unreachable": (
            S3Settings(bucket=bucket, endpoint_url="http://127.0.0.1:9"),
            good,
        ),
    }
    for code, (settings, env) in cases.items():
        with pytest.raises(ConfigError) as failed:
            await S3FileStore(settings, env=env).check()
        assert failed.value.code == code, failed.value.message
        assert "Traceback" not in failed.value.message


async def test_settings_choose_the_engine(tmp_path: Path, s3_server: MotoS3, bucket: str) -> None:
    home = {"SOONG_AGENT_HOME": str(tmp_path)}
    assert load_settings(env=home).files.engine == "local"
    assert isinstance(await open_file_store(load_settings(env=home)), LocalFileStore)
    with pytest.raises(ConfigError) as no_bucket:
        load_settings(env={**home, "SOONG_FILES_ENGINE": "s3"})
    assert "bucket" in no_bucket.value.message
    (tmp_path / "config.toml").write_text(
        f'[files]\nengine = "s3"\n[files.s3]\nbucket = "{bucket}"\n'
        f'endpoint_url = "{s3_server.endpoint}"\n'
    )
    settings = load_settings(env=home)
    assert settings.files.s3.bucket == bucket
    with pytest.raises(ValidationError):
        S3Settings(bucket="Not_A_Bucket")
    with pytest.raises(ValidationError):
        FileStoreSettings.model_validate({"engine": "s3", "s3": {"bucket": bucket, "key": "x"}})
