"""The parsers of the stack's commands: ``up``, ``serve``, ``keys``, ``backup``, ``restore``,
``migrate``, ``migrate-data`` and ``compose-check``.

Registered with the ``soong_agent.commands`` entry point (``pyproject.toml``). Building the CLI
imports every such module, so this one imports nothing heavy: ``soong-agent --help`` (and a
typo) answers at once, and the commands' own modules (:mod:`services.stack.commands`) load only
when one of them runs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Final

__all__ = ["SERVICES", "add_parser", "run"]

# The services ``serve`` starts; the same names as ``agent_core.bus.SERVICE_NAMES`` (a test pins
# it), spelled out here so that building the parser imports no bus.
SERVICES: Final = ("gateway", "run_worker", "storage_writer", "task_wal", "memory_extraction")


def add_parser(sub: Any) -> None:
    """Add the stack's commands to the CLI's subparsers."""
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
    serve.add_argument("name", choices=SERVICES)
    serve.add_argument("--instance", default=None, help="stable instance id (consumer name)")
    # A service whose configuration cannot work: a restart cannot help, EX_CONFIG tells its
    # supervisor so (``up`` then stops the stack). Elsewhere the person reads the line.
    serve.set_defaults(config_error_exit=os.EX_CONFIG)

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

    backup = sub.add_parser(
        "backup", help="back up the home (database, bus, files) while the stack runs"
    )
    backup.add_argument("dir", type=Path, help="a new folder for the backup")
    restore = sub.add_parser(
        "restore", help="restore a backup into a home that has no database yet"
    )
    restore.add_argument("dir", type=Path, help="the backup's folder")

    sub.add_parser(
        "migrate",
        help="create or upgrade the storage database's schema ([storage] backend) and exit",
    )

    move = sub.add_parser(
        "migrate-data",
        help="move a SQLite home's record into the PostgreSQL of SOONG_POSTGRES_DSN (verified)",
    )
    move.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=None,
        help="the SQLite database (default: the home's sessions.sqlite)",
    )

    check = sub.add_parser("compose-check", help="validate a compose file against this CLI")
    check.add_argument("file", type=Path)


def run(args: argparse.Namespace) -> int:
    """Carry out one of the commands above (see :mod:`services.stack.commands`)."""
    from services.stack import commands

    return commands.run(args)


def _duration(text: str) -> float:
    """Seconds of ``90d``, ``12h``, ``30m`` or ``45s``."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.isdigit() or int(number) <= 0:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 90d, 12h, 30m)")
    return float(int(number) * units[unit])
