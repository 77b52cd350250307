"""``soong-agent memory replay FILE --home DIR --account ID [--no-llm]``: the pipeline, offline.

FILE holds one interaction per line (``{"turns": [...], "skills": [...]}``; skills are names or
``{"name", "description"}`` objects, tool calls are on the tool turn or, transcript-style, in the
assistant turn's ``tool_calls`` answered by ``tool_call_id``); the memory files
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
from agent_core.files import read_versioned
from agent_core.memory import Interaction, UpdateOp
from agent_core.memory.evaluation import EpisodeLabels, Score, leaked, score_episode
from agent_core.provider import aclose_adapter

from .consolidate import BatchItem, Consolidator
from .llm import LLMProposer
from .service import make_proposer
from .store import CHANGE_LOG, ChangeRecord, MemoryStore, Source

__all__ = ["ReplayResult", "read_items", "replay", "replay_episode", "run"]

_LINE = "replay:"


def read_items(path: Path) -> list[BatchItem]:
    """The interactions of a replay file, each with ``replay:<line>`` as its provenance."""
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
        items.append(BatchItem(interaction=ix, source=Source(interaction_id=f"{_LINE}{n}")))
    return items


class ReplayResult:
    """What a replay did: batches per mode, changes written, and the lines that changed memory."""

    def __init__(self) -> None:
        self.modes: dict[str, int] = {"llm": 0, "fallback": 0, "skipped": 0}
        self.changes = 0
        self.changed_lines: set[int] = set()


async def replay(
    consolidator: Consolidator, account: str, items: list[BatchItem], batch: int = 1
) -> ReplayResult:
    """Consolidate ``items`` in order, ``batch`` at a time, exactly as the service does."""
    result = ReplayResult()
    size = max(batch, 1)
    for start in range(0, len(items), size):
        report = await consolidator.consolidate(account, items[start : start + size])
        result.modes[report.mode] += 1
        result.changes += len(report.changes)
        for record in report.changes:
            if record.op == UpdateOp.NONE:
                continue
            for source in record.sources:
                line = (source.interaction_id or "").removeprefix(_LINE)
                if line.isdigit():
                    result.changed_lines.add(int(line))
    return result


async def replay_episode(
    path: Path,
    home: Path,
    labels: EpisodeLabels,
    proposer: LLMProposer | None = None,
    *,
    account: str = "acct",
    batch: int = 1,
) -> Score:
    """Replay one labelled episode from the memory in ``home`` and score the files it leaves.

    The change log is checked too: a labelled secret found there counts as leaked.
    """
    store = MemoryStore(home)
    result = await replay(Consolidator(store, proposer), account, read_items(path), batch)
    # Lines are attributed per interaction only when each is consolidated alone.
    changed = result.changed_lines if batch <= 1 else None
    score = score_episode(labels, (await store.load(account)).documents, changed)
    score.touched = [f"{path.stem}:{t}" for t in score.touched]
    log = (await read_versioned(store.files, f"{store.memory_key(account)}/{CHANGE_LOG}"))[0]
    texts = _logged_texts(log.decode("utf-8")) if log is not None else []
    score.secrets_leaked += leaked(labels.secrets, texts)
    return score


def _logged_texts(log: str) -> list[str]:
    """The change log's texts, without its timestamps and ETags (see ``said``).

    A line that is not a change record is taken whole: what it holds cannot be told apart.
    """
    texts: list[str] = []
    for line in filter(None, log.splitlines()):
        try:
            rec = ChangeRecord.model_validate_json(line)
        except ValidationError:
            texts.append(line)
            continue
        texts += [
            rec.scope,
            rec.entry_id or "",
            rec.old_text or "",
            rec.new_text or "",
            rec.note or "",
        ]
    return texts


def _labels(path: Path, episode: str) -> EpisodeLabels:
    data = json.loads(path.read_text(encoding="utf-8"))
    return EpisodeLabels.model_validate(data.get(episode, data) if isinstance(data, dict) else data)


async def _replay(args: argparse.Namespace) -> dict[str, Any]:
    items = read_items(args.file)
    settings = load_settings(env={**os.environ, "SOONG_AGENT_HOME": str(args.home)})
    proposer = None if args.no_llm else make_proposer(settings)
    store = MemoryStore(args.home)
    try:
        result = await replay(Consolidator(store, proposer), args.account, items, args.batch)
    finally:
        if proposer is not None:
            await aclose_adapter(proposer.adapter)
    summary: dict[str, Any] = {
        "interactions": len(items),
        "batches": result.modes,
        "changes": result.changes,
        "llm": proposer is not None,
        "files": [
            str(Path(args.home, store.key(args.account, s)))
            for s in await store.scopes(args.account)
        ],
    }
    if args.labels is not None:
        # Lines are attributed per interaction only when each is consolidated alone.
        changed = result.changed_lines if args.batch <= 1 else None
        labels = _labels(args.labels, args.file.stem)
        summary["score"] = score_episode(
            labels, (await store.load(args.account)).documents, changed
        ).summary()
    return summary


def run(args: argparse.Namespace) -> int:
    """Run ``memory replay``; print the JSON summary; return the exit code."""
    summary = asyncio.run(_replay(args))
    print(json.dumps(summary, ensure_ascii=False))
    return 0
