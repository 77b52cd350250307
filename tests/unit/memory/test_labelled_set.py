"""The fallback pipeline over the labelled set in tests/data/memory (see its README).

Each episode is replayed from empty memory: detect → consolidate (rules) → apply, after every
interaction; the final documents are scored against the labels.
"""

import json
import re
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


HOLDOUT = DATA / "holdout"


def test_holdout_leaks_no_secret_and_reports_its_figures() -> None:
    """The held-out set was written after the rules and never used to tune them.

    Its precision/recall are reported, not gated (they are the honest out-of-sample figures);
    leaking a secret is never acceptable, on any set.
    """
    labels = json.loads((HOLDOUT / "labels.json").read_text(encoding="utf-8"))
    scores = [_score(p, labels) for p in sorted((HOLDOUT / "episodes").glob("*.jsonl"))]
    total = merge_scores(scores)
    print("holdout figures:", total.summary())
    assert total.expected >= 15
    assert total.secrets_leaked == []


FRESH = DATA / "fresh"


def test_fresh_set_meets_the_goals_of_issue_37() -> None:
    """The blind set of issue 37 (two format extensions, skills unknown to the built-in table).

    Its before figures are in ``tests/data/memory/README.md``; since the rules were then changed
    while looking at its misses, this gate guards against regressions, not for generality.
    """
    labels = json.loads((FRESH / "labels.json").read_text(encoding="utf-8"))
    paths = sorted((FRESH / "episodes").glob("*.jsonl"))
    assert len(paths) == len(labels) == 16
    total = merge_scores([_score(p, labels) for p in paths])
    print("fresh figures:", total.summary())
    assert total.precision >= 0.92, total.false_memories
    assert total.recall >= 0.85, total.missed
    assert total.false_memory_rate <= 0.03, total.touched
    assert total.secrets_leaked == []
    assert total.conflicts_resolved == total.conflicts, total.absent_violations


SECOND = DATA / "second"


def test_second_blind_set_leaks_no_secret_and_reports_its_figures() -> None:
    """Written after the issue-37 rules and never used to tune them: its precision and recall
    are reported (the honest estimate, far below the fresh set's), a secret leak is gated."""
    labels = json.loads((SECOND / "labels.json").read_text(encoding="utf-8"))
    paths = sorted((SECOND / "episodes").glob("*.jsonl"))
    assert len(paths) == len(labels) == 7
    total = merge_scores([_score(p, labels) for p in paths])
    print("second blind set figures:", total.summary())
    assert total.expected >= 40
    assert total.secrets_leaked == []


THIRD = DATA / "third"


def test_third_blind_set_leaks_no_secret_and_reports_its_figures() -> None:
    """Written blind while the second set's misses were fixed; its misses were then fixed in
    turn (it is in sample now): a secret leak is gated."""
    labels = json.loads((THIRD / "labels.json").read_text(encoding="utf-8"))
    paths = sorted((THIRD / "episodes").glob("*.jsonl"))
    assert len(paths) == len(labels) == 12
    total = merge_scores([_score(p, labels) for p in paths])
    print("third blind set figures:", total.summary())
    assert total.expected >= 50
    assert total.secrets_leaked == []


FOURTH = DATA / "fourth"


def test_fourth_blind_set_meets_the_goals_it_was_fixed_to() -> None:
    """Written blind while the third set's misses were fixed; its misses were then fixed in turn
    by kind (tests/unit/memory/test_issue37_fourth_set.py), so it is in sample now: this gate
    pins its figures (before: precision 0.544, recall 0.582, false memories 6.9 %, 11 superseded
    values kept) against regressions."""
    labels = json.loads((FOURTH / "labels.json").read_text(encoding="utf-8"))
    paths = sorted((FOURTH / "episodes").glob("*.jsonl"))
    assert len(paths) == len(labels) == 12
    total = merge_scores([_score(p, labels) for p in paths])
    print("fourth blind set figures:", total.summary())
    assert total.expected >= 50
    assert total.precision >= 0.92, total.false_memories
    assert total.recall >= 0.89, total.missed
    assert total.touched == []
    assert total.conflicts_resolved == total.conflicts, total.absent_violations
    assert total.secrets_leaked == []


FIFTH = DATA / "fifth"


def test_fifth_blind_set_leaks_no_secret_and_reports_its_figures() -> None:
    """Written blind (by someone who saw neither the rules nor the other sets) while the fourth
    set's misses were fixed, and never used to tune them: the out-of-sample figures. On the
    rules before that work: precision 0.594, recall 0.552, false memories 2.6 %, 8 superseded
    values kept; after it 0.594 / 0.567 / 2.6 % / 8. A secret leak is gated, and the figures
    may not fall below those."""
    labels = json.loads((FIFTH / "labels.json").read_text(encoding="utf-8"))
    paths = sorted((FIFTH / "episodes").glob("*.jsonl"))
    assert len(paths) == len(labels) == 14
    total = merge_scores([_score(p, labels) for p in paths])
    print("fifth blind set figures:", total.summary())
    assert total.expected >= 60
    assert total.precision >= 0.59, total.false_memories
    assert total.recall >= 0.56, total.missed
    assert total.secrets_leaked == []
