"""The fallback pipeline over the labelled set in tests/data/memory (see its README).

Each episode is replayed from empty memory: detect → consolidate (rules) → apply, after every
interaction; the final documents are scored against the labels.
"""

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_core.memory import (
    Interaction,
    MemoryDocument,
    UpdateOp,
    apply_updates,
    consolidate_fallback,
    detect_signals,
    parse_document,
    render_document,
)
from agent_core.memory.evaluation import EpisodeLabels, Score, merge_scores, score_episode

DATA = Path(__file__).resolve().parents[2] / "data" / "memory"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
LABELS = json.loads((DATA / "labels.json").read_text(encoding="utf-8"))
EPISODES = sorted((DATA / "episodes").glob("*.jsonl"))


def _replay(path: Path) -> tuple[dict[str, MemoryDocument], set[int]]:
    """The documents after the episode and the (1-based) lines that changed them."""
    docs: dict[str, MemoryDocument] = {}
    changed: set[int] = set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        ix = Interaction.model_validate_json(line)
        result = apply_updates(
            docs, consolidate_fallback(detect_signals(ix), docs, now=NOW), now=NOW
        )
        if any(c.op is not UpdateOp.NONE for c in result.applied):
            changed.add(n)
        # What the service writes must parse back to the same state (no drift across writes).
        docs = {s: parse_document(render_document(d), scope=s) for s, d in result.documents.items()}
    return docs, changed


def _score(path: Path, labels: dict[str, object] = LABELS) -> Score:
    docs, changed = _replay(path)
    score = score_episode(EpisodeLabels.model_validate(labels[path.stem]), docs, changed)
    score.touched = [f"{path.stem}:{t}" for t in score.touched]
    return score


def test_set_is_big_enough_and_labelled() -> None:
    lines = [line for p in EPISODES for line in p.read_text(encoding="utf-8").splitlines()]
    assert len(lines) >= 150
    assert {p.stem for p in EPISODES} == set(LABELS)
    chinese = sum(1 for line in lines if re.search(r"[\u4e00-\u9fff]", line))
    assert chinese >= 50 and len(lines) - chinese >= 50
    labels = [EpisodeLabels.model_validate(v) for v in LABELS.values()]
    assert sum(len(lab.untouched) for lab in labels) >= 40
    assert sum(len(lab.secrets) for lab in labels) >= 20
    for path in EPISODES:
        count = len(path.read_text(encoding="utf-8").splitlines())
        assert all(1 <= n <= count for n in LABELS[path.stem].get("untouched", [])), path.stem


def test_fallback_meets_the_goals_on_the_whole_set() -> None:
    total = merge_scores([_score(p) for p in EPISODES])
    print("fallback figures:", total.summary())  # shown with -s; the report quotes them
    assert total.precision >= 0.90, total.false_memories
    assert total.recall >= 0.80, total.missed
    assert total.false_memory_rate <= 0.03, total.touched
    assert total.secrets_leaked == []
    assert total.conflicts_resolved == total.conflicts, total.absent_violations
    assert total.absent_violations == []


@pytest.mark.parametrize("path", EPISODES, ids=lambda p: p.stem)
def test_no_episode_leaks_or_duplicates(path: Path) -> None:
    score = _score(path)
    assert score.secrets_leaked == []
    assert score.duplicates == 0


def test_scorer_counts_what_it_claims() -> None:
    labels = EpisodeLabels.model_validate(
        {
            "expected": [
                {"scope": "user", "all": ["万元"]},
                {"scope": "user", "all": [["一位", "1位"], "小数"]},
            ],
            "absent": [{"scope": "user", "kind": "conflict", "all": ["两位"]}],
            "secrets": ["4111 1111 1111 1111"],
        }
    )
    doc = parse_document(
        "- 金额用万元，保留 1 位小数\n- 金额用万元\n- 保留两位小数\n- 卡号 4111-1111-1111-1111\n",
        scope="user",
    )
    score = score_episode(labels, {"user": doc})
    assert (score.entries, score.true_entries, score.recalled, score.duplicates) == (4, 2, 2, 1)
    assert len(score.false_memories) == 2 and score.conflicts_resolved == 0 and score.conflicts == 1
    assert score.secrets_leaked == ["4111 1111 1111 1111"]


def test_a_short_secret_in_a_timestamp_or_hash_is_not_a_leak() -> None:
    """Only what an author wrote counts: a PIN's digits inside ``updated_at`` are chance."""
    labels = EpisodeLabels.model_validate({"secrets": ["4471"]})
    doc = parse_document("- 金额用万元\n", scope="user")
    doc.updated_at = datetime(2026, 12, 6, 3, 26, 13, 644710, tzinfo=UTC)
    assert "4471" in render_document(doc)
    assert score_episode(labels, {"user": doc}).secrets_leaked == []
    said = parse_document("- 报销系统 PIN 44-71\n", scope="user")
    assert score_episode(labels, {"user": said}).secrets_leaked == ["4471"]


@dataclass(frozen=True)
class Gate:
    """What a blind set of ``tests/data/memory/<name>`` must hold (its README tells how and when
    it was written). A set the rules were then fixed to pins its figures against regressions; one
    they were never tuned to is the honest out-of-sample estimate, gated for secrets and at the
    floor it was measured at."""

    episodes: int
    expected: int
    precision: float = 0.0
    recall: float = 0.0
    false_memory_rate: float = 1.0
    untouched_kept: bool = False  # every ``untouched`` line left memory as it was
    superseded_dropped: bool = False  # no old value kept beside the one that replaced it


BLIND_SETS = {
    # Written after the rules, never used to tune them.
    "holdout": Gate(episodes=6, expected=15),
    # Issue 37's first blind set; the rules were then changed while looking at its misses.
    "fresh": Gate(16, 0, 0.92, 0.85, 0.03, superseded_dropped=True),
    # Written after the issue-37 rules; reported (far below the fresh set's figures).
    "second": Gate(7, 40),
    # Written blind while the second set's misses were fixed, then fixed in turn.
    "third": Gate(12, 50),
    # Written blind while the third set's were fixed, then fixed by kind
    # (test_issue37_fourth_set.py); before: 0.544 / 0.582, false memories 6.9 %, 11 superseded.
    "fourth": Gate(12, 50, 0.92, 0.89, untouched_kept=True, superseded_dropped=True),
    # Written blind by someone who saw neither the rules nor the other sets while the fourth
    # set's misses were fixed, never tuned to: 0.594 / 0.552 before that work, 0.594 / 0.567
    # after (false memories 2.6 %, 8 superseded kept, both times).
    "fifth": Gate(14, 60, 0.59, 0.56),
}


@pytest.mark.parametrize("name", sorted(BLIND_SETS))
def test_a_blind_set_holds_its_gate(name: str) -> None:
    gate, folder = BLIND_SETS[name], DATA / name
    labels = json.loads((folder / "labels.json").read_text(encoding="utf-8"))
    paths = sorted((folder / "episodes").glob("*.jsonl"))
    assert len(paths) == len(labels) == gate.episodes
    total = merge_scores([_score(p, labels) for p in paths])
    print(f"{name} set figures:", total.summary())
    assert total.expected >= gate.expected
    assert total.precision >= gate.precision, total.false_memories
    assert total.recall >= gate.recall, total.missed
    assert total.false_memory_rate <= gate.false_memory_rate, total.touched
    if gate.untouched_kept:
        assert total.touched == []
    if gate.superseded_dropped:
        assert total.conflicts_resolved == total.conflicts, total.absent_violations
    assert total.secrets_leaked == []
