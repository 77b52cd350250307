"""The CLI commands that need the services: ``up``, ``serve``, ``keys`` and ``compose-check``.

Registered with the ``soong_agent.commands`` entry point; :mod:`agent_core.cli` adds the parsers
(:func:`add_parser`), calls :func:`run` for the commands they own and turns expected failures
into one line and an exit code.
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

from agent_core.bus import SERVICE_NAMES, BusNames
from agent_core.config import Settings, load_settings
from agent_core.errors import ConfigError
from agent_core.service.runner import EXIT_CONFIG

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Add ``up``, ``serve``, ``keys`` and ``compose-check`` to the CLI's subparsers."""
    up = sub.add_parser("up", help="start Valkey (unless SOONG_REDIS_URL is set) and all services")
    up.add_argument("--workers", type=int, default=None, help="run-worker processes (default 2)")
    up.add_argument(
        "--fake-provider",
        action="store_true",
        help="DEMO ONLY: answer with a scripted fake model instead of a real provider",
    )
    up.add_argument(
        "--new-dev-key",
        action="store_true",
        help="revoke the home's development key and print a new one",
    )

    serve = sub.add_parser("serve", help="run one service")
    serve.add_argument("name", choices=SERVICE_NAMES)
    serve.add_argument("--instance", default=None, help="stable instance id (consumer name)")
    # A service whose configuration cannot work: a restart cannot help, EX_CONFIG tells its
    # supervisor so (``up`` then stops the stack). Elsewhere the person reads the line.
    serve.set_defaults(config_error_exit=EXIT_CONFIG)

    keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key; it is printed once")
    create.add_argument("--account", required=True)
    create.add_argument(
        "--expires-in", type=_duration, default=None, help="e.g. 90d, 12h, 30m (default: never)"
    )
    listing = keys_sub.add_parser("list", help="key ids, accounts, creation and last use")
    listing.add_argument("--account", default=None)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id")

    check = sub.add_parser("compose-check", help="validate a compose file against this CLI")
    check.add_argument("file", type=Path)


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
    raise AssertionError(f"not a stack command: {args.command}")


def _duration(text: str) -> float:
    """Seconds of ``90d``, ``12h``, ``30m`` or ``45s``."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.isdigit() or int(number) <= 0:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 90d, 12h, 30m)")
    return float(int(number) * units[unit])


def settings_with_stack(settings: Settings) -> Settings:
    """Fill ``bus.redis_url`` from a running ``up`` (embedded Valkey) when it is not configured."""
    if settings.bus.redis_url:
        return settings
    from services.stack.up import STACK_FILE

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
    redis = await reachable_redis(settings.bus.redis_url)
    try:
        store = ApiKeyStore(redis, BusNames(settings.bus.namespace))
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
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print(f"{file}: ok")
    return 1 if problems else 0
