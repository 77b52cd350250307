"""The parsers of the SDK's commands, ``chat`` and ``assistants`` (registered with the
``soong_agent.commands`` entry point). It imports nothing heavy, so building the CLI stays
instant; the client (:mod:`soong_agent.chat`, :mod:`soong_agent.assistants_cli`) loads only when
one of them runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]


def _gateway_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None, help="gateway URL (default $SOONG_GATEWAY_URL)")
    parser.add_argument("--key", default=None, help="API key (default $SOONG_API_KEY)")


def add_parser(subparsers: Any) -> None:
    """Register ``chat`` and ``assistants`` on the CLI's subparsers."""
    chat = subparsers.add_parser("chat", help="chat with an agent through a gateway")
    _gateway_arguments(chat)
    chat.add_argument("--session", default=None, help="resume this session id")
    chat.add_argument(
        "--assistant", default=None, help="start the session from this named agent (assistant)"
    )

    cmd = subparsers.add_parser("assistants", help="manage named agents (assistants)")
    _gateway_arguments(cmd)
    sub = cmd.add_subparsers(dest="assistants_command", required=True)
    listing = sub.add_parser("list", help="the account's assistants")
    listing.add_argument("--all", action="store_true", help="archived ones too")
    show = sub.add_parser("show", help="one assistant (latest version, or --version)")
    show.add_argument("name")
    show.add_argument("--version", type=int, default=None)
    sub.add_parser("versions", help="an assistant's versions").add_argument("name")
    create = sub.add_parser("create", help="create one from a JSON definition")
    create.add_argument("--file", type=Path, required=True)
    update = sub.add_parser("update", help="change fields (JSON): a new version")
    update.add_argument("name")
    update.add_argument("--file", type=Path, required=True)
    update.add_argument("--if-version", type=int, default=None)
    sub.add_parser("delete", help="archive one").add_argument("name")


def run(args: argparse.Namespace) -> int:
    """Carry out ``chat`` or an ``assistants`` command."""
    if args.command == "chat":
        from soong_agent import chat

        return chat.run(args)
    from soong_agent import assistants_cli

    return assistants_cli.run(args)
