"""``soong-agent memory replay FILE --home DIR --account ID [--no-llm]``: the pipeline, offline.

FILE holds one interaction per line (``{"turns": [...], "skills": [...]}``); the memory files
already in DIR are the starting memory. Detection, consolidation (the configured memory model,
or the rules with ``--no-llm`` or when the model fails), fallback and file writing run exactly as
in the service; no bus is needed. The last line printed is a JSON summary (with the score when
``--labels`` is given). Exits when done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_core.config import load_settings
from agent_core.errors import SchemaError
from agent_core.memory import Interaction
from agent_core.memory.evaluation import EpisodeLabels, score_episode
from agent_core.provider import aclose_adapter

from .consolidate import BatchItem, Consolidator
from .service import make_proposer
from .store import MemoryStore, Source

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


def _read(path: Path) -> list[BatchItem]:
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            ix = Interaction.model_validate_json(line)
        except ValidationError as exc:
            raise SchemaError(
                "replay_line_invalid", f"{path.name}:{n}: not an interaction: {exc.errors()[0]}"
            ) from exc
        items.append(BatchItem(interaction=ix, source=Source(interaction_id=f"replay:{n}")))
    return items


def _labels(path: Path, episode: str) -> EpisodeLabels:
    data = json.loads(path.read_text(encoding="utf-8"))
    return EpisodeLabels.model_validate(data.get(episode, data) if isinstance(data, dict) else data)


async def _replay(args: argparse.Namespace) -> dict[str, Any]:
    items = _read(args.file)
    settings = load_settings(env={**os.environ, "SOONG_AGENT_HOME": str(args.home)})
    proposer = None if args.no_llm else make_proposer(settings)
    store = MemoryStore(args.home)
    consolidator = Consolidator(store, proposer)
    modes: dict[str, int] = {"llm": 0, "fallback": 0, "skipped": 0}
    changes = 0
    try:
        for start in range(0, len(items), max(args.batch, 1)):
            report = await consolidator.consolidate(
                args.account, items[start : start + max(args.batch, 1)]
            )
            modes[report.mode] += 1
            changes += len(report.changes)
    finally:
        if proposer is not None:
            await aclose_adapter(proposer.adapter)
    summary: dict[str, Any] = {
        "interactions": len(items),
        "batches": modes,
        "changes": changes,
        "llm": proposer is not None,
        "files": [str(store.path(args.account, s)) for s in store.scopes(args.account)],
    }
    if args.labels is not None:
        score = score_episode(
            _labels(args.labels, args.file.stem), store.load(args.account).documents
        )
        summary["score"] = score.summary()
    return summary


def run(args: argparse.Namespace) -> int:
    """Run ``memory replay``; print the JSON summary; return the exit code."""
    summary = asyncio.run(_replay(args))
    print(json.dumps(summary, ensure_ascii=False))
    return 0
