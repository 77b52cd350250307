"""The parser of ``soong-agent memory replay`` (registered with the ``soong_agent.commands``
entry point). It imports nothing heavy, so building the CLI stays instant; the replay itself
(:mod:`services.memory_extraction.replay`) loads only when it runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> None:
    """Add ``memory replay`` to the CLI's subparsers."""
    memory = subparsers.add_parser("memory", help="memory tools")
    memory_sub = memory.add_subparsers(dest="memory_command", required=True)
    replay = memory_sub.add_parser("replay", help="run the memory pipeline over recorded turns")
    replay.add_argument("file", type=Path, help="JSON Lines, one interaction per line")
    replay.add_argument("--home", type=Path, required=True, help="home whose memory is updated")
    replay.add_argument("--account", required=True, help="account id")
    replay.add_argument("--no-llm", action="store_true", help="rules only, no model call")
    replay.add_argument("--batch", type=int, default=1, help="interactions per consolidation")
    replay.add_argument("--labels", type=Path, default=None, help="score against these labels")


def run(args: argparse.Namespace) -> int:
    """Run ``memory replay`` (see :mod:`services.memory_extraction.replay`)."""
    from services.memory_extraction import replay

    return replay.run(args)
