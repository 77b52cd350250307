"""The labelled set through the service's pipeline and files, in both modes.

Fallback only: no model. Scripted LLM: the real OpenAI adapter against the wire-faithful fake
server, whose answers come from :class:`~tests.integration.memory_extraction.oracle.Oracle`
(prompt → JSON → validation → apply → files). Every episode starts from an empty home.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_core.memory.evaluation import EpisodeLabels, Score, merge_scores
from agent_core.provider import ProviderRegistry, ProviderSettings, aclose_adapter
from services.memory_extraction.llm import LLMProposer
from services.memory_extraction.replay import replay_episode
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.memory_extraction.oracle import Oracle

DATA = Path(__file__).resolve().parents[2] / "data" / "memory"
LABELS = json.loads((DATA / "labels.json").read_text(encoding="utf-8"))
EPISODES = sorted((DATA / "episodes").glob("*.jsonl"))


@pytest.fixture
async def llm() -> AsyncIterator[tuple[Oracle, FakeOpenAIServer, LLMProposer]]:
    oracle = Oracle()
    server = FakeOpenAIServer(default=oracle)
    async with server:
        adapter = ProviderRegistry().create(
            ProviderSettings(
                provider="openai",
                base_url=server.sdk_base_url,
                api_key="sk-test-abcdefghijklmnopqrstuvwx",
                max_retries=0,
            )
        )
        try:
            yield oracle, server, LLMProposer(adapter, "fake-model", timeout_s=10)
        finally:
            await aclose_adapter(adapter)


async def _run(
    path: Path,
    home: Path,
    proposer: LLMProposer | None,
    batch: int,
    labels_of: dict[str, object] = LABELS,
) -> Score:
    """One episode through ``replay_episode`` (what ``soong-agent memory replay`` runs)."""
    labels = EpisodeLabels.model_validate(labels_of[path.stem])
    return await replay_episode(path, home, labels, proposer, batch=batch)


def _check(total: Score, precision: float, recall: float) -> None:
    assert total.precision >= precision, total.false_memories
    assert total.recall >= recall, total.missed
    assert total.secrets_leaked == []
    assert total.duplicates == 0
    assert total.conflicts_resolved == total.conflicts, total.absent_violations
    assert total.false_memory_rate <= 0.03, total.touched


async def test_fallback_mode_meets_the_goals(tmp_path: Path) -> None:
    scores = [await _run(p, tmp_path / p.stem, None, 1) for p in EPISODES]
    total = merge_scores(scores)
    print("fallback (service pipeline):", total.summary())
    assert total.untouched >= 40
    _check(total, 0.90, 0.80)


@pytest.mark.parametrize("batch", [1, 4])
async def test_scripted_llm_mode_meets_the_goals(
    tmp_path: Path, llm: tuple[Oracle, FakeOpenAIServer, LLMProposer], batch: int
) -> None:
    oracle, server, proposer = llm
    scores = []
    for path in EPISODES:
        oracle.labels = EpisodeLabels.model_validate(LABELS[path.stem])
        scores.append(await _run(path, tmp_path / path.stem, proposer, batch))
    total = merge_scores(scores)
    print(f"scripted LLM, batches of {batch}:", total.summary())
    assert oracle.answers == len(server.requests) > 0
    assert server.unscripted == 0
    _check(total, 0.95, 0.90)
    # The model never saw a secret either: the prompt is scrubbed before it leaves.
    sent = "".join(r.body.decode() for r in server.requests).replace(" ", "")
    secrets = [s for p in EPISODES for s in LABELS[p.stem]["secrets"]]
    assert [s for s in secrets if s.replace(" ", "") in sent] == []


HOLDOUT = DATA / "holdout"


@pytest.mark.parametrize("mode", ["fallback", "llm"])
async def test_holdout_leaks_no_secret_and_reports_its_figures(
    tmp_path: Path, llm: tuple[Oracle, FakeOpenAIServer, LLMProposer], mode: str
) -> None:
    """Written after the rules, never used to tune them: figures reported, secrets gated."""
    oracle, _, proposer = llm
    labels = json.loads((HOLDOUT / "labels.json").read_text(encoding="utf-8"))
    scores = []
    for path in sorted((HOLDOUT / "episodes").glob("*.jsonl")):
        oracle.labels = EpisodeLabels.model_validate(labels[path.stem])
        scores.append(
            await _run(path, tmp_path / path.stem, proposer if mode == "llm" else None, 1, labels)
        )
    total = merge_scores(scores)
    print(f"holdout, {mode}:", total.summary())
    assert total.expected >= 15
    assert total.secrets_leaked == []
