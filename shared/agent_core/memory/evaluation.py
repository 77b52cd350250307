"""Score memory documents against the labelled set (format: ``tests/data/memory/README.md``).

Each actual entry may cover several expected entries (one bullet may hold two preferences).
precision = entries covering ≥ 1 expected / all entries; recall = expected covered / all
expected; false memories = entries covering none; duplicates = extra entries covering an expected
entry that another entry already covers; conflicts resolved = ``conflict``/``delete`` absents that
hold; secrets leaked = secrets found in what a document's authors wrote (not its timestamps or
hashes); false-memory rate = interactions labelled ``untouched`` that changed memory /
interactions labelled ``untouched``; supersession failures = old values still present
(``conflict``/``delete`` absents violated) + duplicates.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .document import MemoryDocument

__all__ = [
    "EpisodeLabels",
    "ExpectedEntry",
    "Score",
    "entry_matches",
    "merge_scores",
    "score_episode",
]

Keyword = str | list[str]


class ExpectedEntry(BaseModel):
    """A labelled entry: accepted scope(s) and keywords that must all appear (a list = any of)."""

    model_config = ConfigDict(extra="forbid")

    scope: str | list[str]
    all: list[Keyword]
    note: str = ""
    kind: str = ""  # only on absents: conflict, delete, one_off, question, …

    def scopes(self) -> list[str]:
        """The accepted scopes as a list (``*`` accepts any)."""
        return [self.scope] if isinstance(self.scope, str) else list(self.scope)


class EpisodeLabels(BaseModel):
    """The labels of one episode: the memory expected after its last interaction."""

    model_config = ConfigDict(extra="forbid")

    expected: list[ExpectedEntry] = Field(default_factory=list)
    absent: list[ExpectedEntry] = Field(default_factory=list)
    secrets: list[str] = Field(default_factory=list)
    # 1-based line numbers of the interactions that must leave memory untouched.
    untouched: list[int] = Field(default_factory=list)


class Score(BaseModel):
    """Counts of one or more episodes; ratios are properties so scores can be summed."""

    model_config = ConfigDict(extra="forbid")

    entries: int = 0
    true_entries: int = 0
    expected: int = 0
    recalled: int = 0
    false_memories: list[str] = Field(default_factory=list)
    missed: list[str] = Field(default_factory=list)
    duplicates: int = 0
    conflicts: int = 0
    conflicts_resolved: int = 0
    absent_violations: list[str] = Field(default_factory=list)
    secrets_leaked: list[str] = Field(default_factory=list)
    untouched: int = 0
    touched: list[str] = Field(default_factory=list)  # untouched interactions that changed memory

    @property
    def false_memory_rate(self) -> float:
        """Share of the interactions labelled ``untouched`` that changed memory anyway."""
        return len(self.touched) / self.untouched if self.untouched else 0.0

    @property
    def supersession_failures(self) -> int:
        """Old values left beside their replacement (or not forgotten) plus duplicate entries."""
        return self.conflicts - self.conflicts_resolved + self.duplicates

    @property
    def precision(self) -> float:
        """Share of written entries that a label asked for (1.0 when nothing was written)."""
        return self.true_entries / self.entries if self.entries else 1.0

    @property
    def recall(self) -> float:
        """Share of labelled entries that some written entry covers (1.0 when none expected)."""
        return self.recalled / self.expected if self.expected else 1.0

    def summary(self) -> dict[str, Any]:
        """The figures to report."""
        return {
            "precision": round(self.precision, 3),
            "recall": round(self.recall, 3),
            "entries": self.entries,
            "expected": self.expected,
            "false_memories": len(self.false_memories),
            "duplicates": self.duplicates,
            "conflicts_resolved": f"{self.conflicts_resolved}/{self.conflicts}",
            "secrets_leaked": len(self.secrets_leaked),
            "untouched": self.untouched,
            "false_memory_rate": round(self.false_memory_rate, 3),
            "supersession_failures": self.supersession_failures,
        }


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text).casefold())


def entry_matches(label: ExpectedEntry, scope: str, text: str) -> bool:
    """True when an entry of ``scope`` with ``text`` satisfies ``label``."""
    if "*" not in label.scopes() and scope not in label.scopes():
        return False
    norm = _norm(text)
    return all(
        any(_norm(k) in norm for k in ([kw] if isinstance(kw, str) else kw)) for kw in label.all
    )


def score_episode(
    labels: EpisodeLabels,
    documents: Mapping[str, MemoryDocument],
    changed_lines: Collection[int] | None = None,
) -> Score:
    """Score the final documents of one episode against its labels.

    ``changed_lines`` are the (1-based) interactions whose consolidation changed memory; without
    them the ``untouched`` labels are not scored.
    """
    actual = [(scope, e.text) for scope, doc in documents.items() for e in doc.entries]
    score = Score(entries=len(actual), expected=len(labels.expected))
    covered: dict[int, int] = {}
    for scope, text in actual:
        hits = [i for i, lab in enumerate(labels.expected) if entry_matches(lab, scope, text)]
        if not hits:
            score.false_memories.append(f"{scope}: {text}")
            continue
        score.true_entries += 1
        if all(i in covered for i in hits):
            score.duplicates += 1
        for i in hits:
            covered[i] = covered.get(i, 0) + 1
    score.recalled = len(covered)
    score.missed = [str(lab.all) for i, lab in enumerate(labels.expected) if i not in covered]
    for lab in labels.absent:
        violated = any(entry_matches(lab, scope, text) for scope, text in actual)
        if lab.kind in ("conflict", "delete"):
            score.conflicts += 1
            score.conflicts_resolved += 0 if violated else 1
        if violated:
            score.absent_violations.append(f"{lab.kind}: {lab.all}")
    score.secrets_leaked = leaked(labels.secrets, [t for d in documents.values() for t in said(d)])
    if changed_lines is not None:
        score.untouched = len(labels.untouched)
        score.touched = [f"line {n}" for n in labels.untouched if n in changed_lines]
    return score


def said(doc: MemoryDocument) -> list[str]:
    """Every text of ``doc`` that a person or a model wrote, in the form the file holds it.

    The machine's fields (``updated_at``, the ids' hashes, the budget) are left out: a short
    labelled secret, a four-digit PIN, turns up inside a timestamp or a hex hash by chance
    (about once in a few hundred replays), and that is not a leak.
    """
    texts = [*doc.free_text(), *(json.dumps(v, ensure_ascii=False) for v in doc.extra.values())]
    for e in doc.entries:
        texts += [e.text, e.slot or "", e.raw or ""]
    return texts


def leaked(secrets: Sequence[str], texts: Sequence[str]) -> list[str]:
    """The ``secrets`` found in ``texts``, spaces, hyphens and case ignored."""
    joined = "\n".join(_secret_norm(t) for t in texts)
    return [s for s in secrets if _secret_norm(s) in joined]


def _secret_norm(text: str) -> str:
    return re.sub(r"[\s\-]+", "", text).casefold()


def merge_scores(scores: Sequence[Score]) -> Score:
    """The sum of several episodes' scores."""
    total = Score()
    for s in scores:
        for name in type(total).model_fields:
            setattr(total, name, getattr(total, name) + getattr(s, name))
    return total
