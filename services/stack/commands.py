"""The CLI commands that need the services: ``up``, ``serve``, ``keys``, ``backup``,
``restore``, ``migrate``, ``migrate-data`` and ``compose-check``.

Their parsers are in :mod:`services.stack.cli` (registered with the ``soong_agent.commands``
entry point, and light to import); :mod:`agent_core.cli` calls :func:`run` through it and turns
expected failures into one line and an exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvloop

from agent_core.bus import BusNames
from agent_core.config import Settings, load_settings
from agent_core.errors import ConfigError
from services.stack.stackfile import STACK_FILE

__all__ = ["run", "settings_with_stack"]


def run(args: argparse.Namespace) -> int:
    """Carry out one of this module's commands; expected failures raise ``AgentCoreError``."""
    if args.command == "serve":
        return _serve(args.name, args.instance)
    if args.command == "up":
        from services.stack.up import run_stack

        return run_stack(
            load_settings(),
            workers=args.workers,
            fake_provider=args.fake_provider,
            new_dev_key=args.new_dev_key,
        )
    if args.command == "keys":
        return asyncio.run(_keys(args))
    if args.command == "compose-check":
        return _compose_check(args.file)
    if args.command == "migrate":
        return _migrate(load_settings())
    if args.command == "migrate-data":
        return _migrate_data(load_settings(), args.source)
    if args.command in ("backup", "restore"):
        return _backup_or_restore(args.command, args.dir)
    raise AssertionError(f"not a stack command: {args.command}")


def settings_with_stack(settings: Settings) -> Settings:
    """Fill ``bus.redis_url`` from a running ``up`` (embedded Valkey) when it is not configured."""
    if settings.bus.redis_url:
        return settings
    stack = settings.home / STACK_FILE
    if stack.exists():
        try:
            url = str(json.loads(stack.read_text())["redis_url"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                "stack_file_unreadable",
                f"{stack}: not a stack file of `soong-agent up` ({type(exc).__name__})",
                details={"file": str(stack)},
            ) from None
        return settings.model_copy(
            update={"bus": settings.bus.model_copy(update={"redis_url": url})}
        )
    raise ConfigError(
        "redis_url_missing",
        "no Redis: set SOONG_REDIS_URL or start the stack with `soong-agent up`",
        details={"key": "bus.redis_url"},
    )


def _backup_or_restore(command: str, folder: Path) -> int:
    from services.stack.backup import backup_home, ensure_new, restore_home

    if command == "backup":
        ensure_new(folder)  # before looking for the stack: the folder is the first thing to fix
        manifest = backup_home(settings_with_stack(load_settings()), folder)
        said = "backed up"
    else:
        manifest = restore_home(load_settings(), folder)
        said = "restored"
    shards = len(manifest["database"]) - 1
    print(
        f"{said} {folder}: the database (catalog and {shards} shards), "
        f"{manifest['bus_keys']} bus keys, {manifest['files']} files"
    )
    return 0


def _migrate(settings: Settings) -> int:
    """Apply the storage schema's missing migrations (the writer also does at start-up)."""
    if settings.storage.backend == "postgres":
        from services.storage_writer.backends.pg_connect import resolve_dsn
        from services.storage_writer.backends.postgres import migrate_database

        applied = migrate_database(resolve_dsn(), settings.storage.partitions)
        where = "PostgreSQL"
    else:
        from services.storage_writer.shards import open_catalog

        open_catalog(settings.db_path)  # idempotent: migrates the catalog and every shard
        print(f"{settings.db_path}: the schema is current")
        return 0
    done = ", ".join(str(v) for v in applied)
    print(f"{where}: " + (f"applied schema version {done}" if applied else "the schema is current"))
    return 0


def _migrate_data(settings: Settings, source: Path | None) -> int:
    """Move the SQLite record into PostgreSQL (``services.storage_writer.backends.move``)."""
    from services.storage_writer.backends.move import move_home
    from services.storage_writer.backends.pg_connect import resolve_dsn
    from services.storage_writer.backends.postgres import migrate_database, open_connection

    dsn = resolve_dsn()
    migrate_database(dsn, settings.storage.partitions)
    conn = open_connection(dsn)
    try:
        report = move_home(source or settings.db_path, conn)
    finally:
        conn.close()
    for check in report.checks:
        print(f"{check.table}: {check.rows} rows, checksum {check.checksum} (same in both)")
    print(f'moved {report.sessions} sessions into PostgreSQL; set [storage] backend = "postgres"')
    return 0


def _serve(name: str, instance: str | None) -> int:
    from agent_core.service import run_service
    from services.stack.registry import service_factory

    settings = settings_with_stack(load_settings())
    build = service_factory(name)
    inst = instance or os.environ.get("SOONG_INSTANCE") or f"{os.uname().nodename}-{os.getpid()}"
    # uvloop: the same asyncio semantics on libuv, a fraction of the event loop's CPU per I/O
    # (every service here is I/O-bound on Redis round trips).
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(run_service(build, settings, name, inst))


async def _keys(args: argparse.Namespace) -> int:
    from services.gateway.devkey import reachable_redis
    from services.gateway.keys import ApiKeyStore

    settings = settings_with_stack(load_settings())
    assert settings.bus.redis_url is not None
    redis = await reachable_redis(settings.bus.redis_url, settings.bus)
    try:
        store = ApiKeyStore(redis, BusNames(settings.bus.namespace))
        await store.adopt_legacy()  # keys made before the {auth} hash tag, once
        if args.keys_command == "create":
            key, record = await store.create(args.account, expires_in_s=args.expires_in)
            print(f"key id:  {record.key_id}\naccount: {record.account_id}\nkey:     {key}")
            print("The key is shown once; store it now.", file=sys.stderr)
            return 0
        if args.keys_command == "list":
            _print_keys(await store.list(args.account))
            return 0
        found = await store.revoke(args.key_id)
        print("revoked" if found else "no such key")
        return 0 if found else 1
    finally:
        await redis.aclose()


def _print_keys(listings: Sequence[Any]) -> None:
    now_ms = time.time() * 1000
    print(f"{'KEY ID':<17} {'ACCOUNT':<20} {'CREATED':<20} {'LAST USED':<20} STATE")
    for item in listings:
        key = item.key
        expires = key.expires_at_ms
        state = (
            "revoked"
            if key.revoked
            else "expired"
            if expires is not None and now_ms >= expires
            else f"expires {_when(expires)}"
            if expires is not None
            else "live"
        )
        print(
            f"{key.key_id:<17} {key.account_id:<20} {key.created_at[:19].replace('T', ' '):<20} "
            f"{_when(item.last_used_ms):<20} {state}"
        )


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _compose_check(file: Path) -> int:
    from agent_core.cli import build_parser
    from services.stack.deploy import check_compose

    problems = check_compose(file, build_parser())
    for problem in problems:  # every problem at once, each in the CLI's one error form
        print(f"error: {problem} [compose_check]", file=sys.stderr)
    if not problems:
        print(f"{file}: ok")
    return 1 if problems else 0
