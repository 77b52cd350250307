"""``soong-agent backup DIR`` and ``soong-agent restore DIR``: a whole home, taken while it runs.

A backup is a folder:

- ``database/``: the catalog and every shard, each copied with SQLite's online backup while the
  storage-writer goes on writing (``services.storage_writer.backup``);
- ``bus.jsonl``: every key of the bus's namespace (API keys, queued runs, live event streams),
  each as Valkey's own serialisation (``DUMP``) with its time to live; restored with ``RESTORE``;
- ``files/``: the home's files (workspaces, uploads, outputs, memory, skills, task lists, the
  development key's record) and the database's artifacts, copied as they are;
- ``manifest.json``: what it holds, with the SHA-256 of each database file, written last (a
  folder without it is an unfinished backup and ``restore`` refuses it).

The parts are taken one after the other, database first: a write that lands in between is in the
later parts only (an upload, a key created). Nothing acknowledged before the backup started is
missing from it. ``restore`` puts a backup into a home that has no database yet, and its bus into
the home's embedded Valkey (started for the purpose) or the configured one.

The bus holds two kinds of keys. What it alone keeps (API keys, permission answers, memory
hand-offs waiting for extraction, the dead-letter stream, the event streams of runs that had
ended) is restored as dumped. What follows from the database or from the processes that ran is
not: the database copy is the backup's point in time, and the dump, taken after it, also holds
what happened since (a command the old writer had not yet acknowledged, which the restored writer
would apply without its run being queued; a run's events past what the copy holds). So the run
queue, the attempt counters and the in-flight runs' event streams are rebuilt from the database,
and the messaging of live processes (commands, queries and replies, health beats, stream and rate
counts, wake-ups) is left out. Every run that had not ended is queued again, a queued run into its
lane's FIFO, a running one into its lane's processing list with no lease and its attempt counter
at the database's attempt, where the restored workers find it as a crashed worker's and take it
over (resumed from its last durable node, or ended ``worker_lost``). Every run of the backup
therefore ends exactly once.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from redis.asyncio import Redis

from agent_core.bus import BusNames, make_redis
from agent_core.bus.names import BusTtl
from agent_core.config import Settings
from agent_core.errors import ConfigError
from agent_core.runqueue import QueuedRun
from agent_core.service.homelock import HomeLock
from agent_core.service.valkey import EmbeddedValkey, home_password
from services.storage_writer.backup import (
    copy_database,
    ended_runs,
    place_database,
    runs_in_flight,
)

__all__ = ["FORMAT", "backup_home", "ensure_new", "restore_home"]

FORMAT: Final = 1
_MANIFEST = "manifest.json"
_SCAN_BATCH = 500
# Parts of a home that are not files to copy: the database (copied by SQLite), the bus (dumped
# key by key) and what a running stack keeps about itself.
_NOT_FILES: Final = ("redis", "run", "up.log")
# Keys (after the namespace) rebuilt from the database on restore, not loaded: the run queue and
# the attempt counters (the fencing tokens, which must continue from the database's attempts).
_REBUILT_KEYS: Final = (
    "fifo:",
    "processing:",
    "lease:",
    "lanes:due:",
    "sessions:due",  # the buckets' one predecessor, in backups of older versions
    "sessions:pending",  # the due set's plain predecessor, in backups of older versions
    "runs",
    "attempt:",
)
# The messaging of the processes that ran: meaningless to the restored ones, and harmful to load
# (a command replayed past the database's point in time, stream counts of a gone gateway).
_TRANSIENT_KEYS: Final = (
    "storage:commands",
    "storage:queries",
    "tasks:commands",
    "memory:queries",
    "memory:lock:",
    "reply:",
    "control:",
    "health:",
    "gateway:wake:",
    "sse:",
    "sse-gateway:",
    "ratelimit:",
    "{auth}:ratelimit:",
    "authfail:",
)
_EVENTS: Final = "events:"


def _db_names(settings: Settings) -> set[str]:
    db = settings.db_path
    return {db.name, f"{db.name}.shards", f"{db.name}.lock", f"{db.name}-wal", f"{db.name}-shm"}


async def _dump_bus(url: str, namespace: str) -> list[str]:
    """Every key of ``namespace`` as a JSON line: key, time to live, ``DUMP`` serialisation."""
    lines: list[str] = []
    redis = make_redis(url)
    try:
        async for batch in _key_batches(redis, f"{namespace}:*"):
            async with redis.pipeline(transaction=False) as pipe:
                for key in batch:
                    pipe.dump(key)
                    pipe.pttl(key)
                replies = await pipe.execute()
            for key, value, ttl in zip(batch, replies[::2], replies[1::2], strict=True):
                if value is None or ttl == -2:  # gone between the scan and the dump
                    continue
                record = {
                    "key": base64.b64encode(key).decode(),
                    "ttl_ms": max(int(ttl), 0),
                    "value": base64.b64encode(value).decode(),
                }
                lines.append(json.dumps(record))
    finally:
        await redis.aclose()
    return lines


async def _key_batches(redis: Redis, pattern: str) -> Any:
    batch: list[bytes] = []
    async for key in redis.scan_iter(match=pattern, count=_SCAN_BATCH):
        batch.append(key)
        if len(batch) >= _SCAN_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _loadable(lines: list[str], namespace: str, db_path: Path) -> list[tuple[bytes, int, bytes]]:
    """The dumped keys a restore loads: key, time to live (ms), ``DUMP`` value (see the module
    docstring for what is left out)."""
    prefix = f"{namespace}:"
    skip = tuple((prefix + k).encode() for k in (*_REBUILT_KEYS, *_TRANSIENT_KEYS))
    events = (prefix + _EVENTS).encode()
    keys: list[tuple[bytes, int, bytes]] = []
    for line in lines:
        record = json.loads(line)
        key = base64.b64decode(record["key"])
        if not key.startswith(skip):
            keys.append((key, int(record["ttl_ms"]), base64.b64decode(record["value"])))
    # An event stream is kept only for a run the copy holds as ended (key: events:{sid}:run_id).
    streamed = {k.rsplit(b":", 1)[1].decode(): k for k, _, _ in keys if k.startswith(events)}
    ended = ended_runs(db_path, sorted(streamed))
    dropped = {key for run_id, key in streamed.items() if run_id not in ended}
    return [k for k in keys if k[0] not in dropped]


async def _load_bus(
    url: str,
    namespace: str,
    keys: list[tuple[bytes, int, bytes]],
    in_flight: list[tuple[QueuedRun, str, int]],
) -> int:
    """``RESTORE`` ``keys``, then queue each ``in_flight`` run (with its database status and
    attempt) again (see the module docstring); the number of keys restored."""
    names = BusNames(namespace)
    redis = make_redis(url)
    try:
        async with redis.pipeline(transaction=False) as pipe:
            for key, ttl_ms, value in keys:
                pipe.restore(key, ttl_ms, value, replace=True)
                if len(pipe) >= _SCAN_BATCH:
                    await pipe.execute()
            for run, status, attempt in in_flight:
                target = names.session_fifo if status == "queued" else names.session_processing
                pipe.rpush(target(run.lane), run.model_dump_json())
                pipe.zadd(names.lanes_due(run.lane), {run.lane: 0})  # due at once
                if attempt > 0:  # the next claim takes attempt + 1 and fences the lost one
                    pipe.set(names.run_attempt(run.run_id), attempt, ex=BusTtl.RUN_ATTEMPT_S)
            await pipe.execute()
    finally:
        await redis.aclose()
    return len(keys)


def _copy_files(settings: Settings, dest: Path) -> tuple[int, int]:
    """The home's files and, when the database lies outside the home, its artifacts."""
    skip = set(_NOT_FILES) | _db_names(settings)
    files = bytes_ = 0
    home = settings.home
    sources = [(home, dest / "home")]
    artifacts = settings.db_path.parent / "artifacts"
    if not artifacts.is_relative_to(home) and artifacts.is_dir():
        sources.append((artifacts, dest / "db-artifacts"))
    for source, target in sources:
        for path in sorted(source.rglob("*")) if source.is_dir() else ():
            relative = path.relative_to(source)
            if source == home and relative.parts[0] in skip:
                continue
            if path.is_symlink() or not path.is_file():
                continue  # a workspace's link never leads a backup out of the home
            copy = target / relative
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
            files += 1
            bytes_ += path.stat().st_size
    return files, bytes_


def ensure_new(dest: Path) -> None:
    """Refuse a backup folder that holds something (``backup_target_not_empty``)."""
    if dest.exists() and any(dest.iterdir()):
        raise ConfigError(
            "backup_target_not_empty", f"{dest} is not empty: give a new folder for the backup"
        )


def backup_home(settings: Settings, dest: Path) -> dict[str, Any]:
    """Take a backup of the home ``settings`` describe into ``dest`` (a new or empty folder);
    the manifest, which is also written last into it."""
    ensure_new(dest)
    url = settings.bus.redis_url
    if url is None:
        raise ConfigError(
            "redis_url_missing",
            "the stack's bus is not reachable: back up a running stack (its run/stack.json), or "
            "set SOONG_REDIS_URL",
        )
    dest.mkdir(parents=True, exist_ok=True)
    database = copy_database(settings.db_path, dest / "database")
    bus = asyncio.run(_dump_bus(url, settings.bus.namespace))
    (dest / "bus.jsonl").write_text("".join(line + "\n" for line in bus), encoding="utf-8")
    keys = len(bus)
    files, size = _copy_files(settings, dest / "files")
    manifest = {
        "format": FORMAT,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "namespace": settings.bus.namespace,
        "database": dict(database),
        "bus_keys": keys,
        "files": files,
        "file_bytes": size,
    }
    (dest / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _manifest(src: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((src / _MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            "backup_unusable", f"{src} holds no finished backup (its {_MANIFEST}: {exc})"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ConfigError("backup_unusable", f"{src} is not a backup of format {FORMAT}")
    return manifest


def restore_home(settings: Settings, src: Path) -> dict[str, Any]:
    """Restore the backup in ``src`` into the home ``settings`` describe, which must have no
    database yet and no stack running; its manifest."""
    manifest = _manifest(src)
    if manifest["namespace"] != settings.bus.namespace:
        raise ConfigError(
            "backup_unusable",
            f"the backup's bus namespace is {manifest['namespace']!r}, this home's "
            f"{settings.bus.namespace!r} (SOONG_NAMESPACE)",
        )
    home = settings.home
    lock = HomeLock(home)
    lock.acquire()  # a second `up`, or a restore into a running home, stops here
    try:
        if settings.db_path.exists():
            raise ConfigError(
                "restore_target_in_use",
                f"{settings.db_path} exists: restore into a new home (SOONG_AGENT_HOME)",
            )
        try:
            place_database(src / "database", manifest["database"], settings.db_path)
        except ValueError as exc:
            raise ConfigError("backup_unusable", str(exc)) from None
        _place_files(src / "files", settings)
        lines = (src / "bus.jsonl").read_text(encoding="utf-8").splitlines()
        rows = runs_in_flight(settings.db_path)
        in_flight = [
            (
                QueuedRun.model_validate(
                    {k: v for k, v in r.items() if k not in ("status", "attempt")}
                ),
                str(r["status"]),
                int(r["attempt"]),
            )
            for r in rows
            if r["kind"] in ("main", "branch")  # a child run goes on inside its parent's
        ]
        keys = _loadable(lines, settings.bus.namespace, settings.db_path)
        restored = _restore_bus(settings, keys, in_flight)
    finally:
        lock.release()
    return {**manifest, "restored_bus_keys": restored, "requeued_runs": len(in_flight)}


def _place_files(files: Path, settings: Settings) -> None:
    home = files / "home"
    if home.is_dir():
        shutil.copytree(home, settings.home, dirs_exist_ok=True)
    artifacts = files / "db-artifacts"
    if artifacts.is_dir():
        shutil.copytree(artifacts, settings.db_path.parent / "artifacts", dirs_exist_ok=True)


def _restore_bus(
    settings: Settings,
    keys: list[tuple[bytes, int, bytes]],
    in_flight: list[tuple[QueuedRun, str, int]],
) -> int:
    url = settings.bus.redis_url
    valkey = None
    if url is None:  # the home's own embedded Valkey, as `up` starts it: AOF keeps what we load
        home = settings.home
        valkey = EmbeddedValkey(home / "redis", appendonly=True, password=home_password(home))
        valkey.start()
        url = valkey.url
    try:
        namespace = settings.bus.namespace
        return asyncio.run(_load_bus(url, namespace, keys, in_flight))
    finally:
        if valkey is not None:
            valkey.stop()
