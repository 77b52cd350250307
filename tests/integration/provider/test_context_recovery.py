"""Recovery paths through each provider's fake, in that provider's real wire shapes: a context
overflow compacts and is tried once more (a second one ends ``prompt_too_long``); an answer cut by
the output limit is continued (until ``max_output_tokens_recovery``); a summarizer that errors,
times out or overflows falls back to a trim that never empties the context."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core.runtime.recovery import CONTINUE_PROMPT
from agent_core.types.enums import EndReason, EventType, NodeType, Role, RunStatus
from agent_core.types.protocol import TextBlock
from tests.fakes import script as s
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.tokens import count_request
from tests.integration.provider.context_harness import (
    big_text,
    compactions,
    config,
    long_path,
    run_path,
)
from tests.integration.provider.harness import PROVIDERS, running
from tests.unit.runtime.fakes import MemoryStore

SUMMARIZER = "You compact a conversation"


def bodies(server: FakeHTTPServer) -> list[str]:
    """The model requests the fake received, as text (Ollama's /api/show left out)."""
    return [r.body.decode() for r in server.requests if not r.path.endswith("/api/show")]


# -- context overflow -----------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_overflow_compacts_and_is_tried_once_more(provider: str) -> None:
    path, store = long_path(6, lines=3), MemoryStore()
    overflow = s.ContextOverflow(prompt_tokens=5000, limit=4096)
    script = [overflow, s.text_turn("SUMMARY-ONE of the builds"), s.text_turn("All built.")]
    async with running(provider, script) as (server, adapter):
        end, loop = await run_path(adapter, path, config(), store=store)
    assert (end.status, end.end_reason) == (RunStatus.COMPLETED, EndReason.COMPLETED)
    first, summarizer, retry = bodies(server)
    assert big_text(0, 3)[:40] in first and SUMMARIZER in summarizer
    assert big_text(0, 3)[:40] in summarizer, "the summarizer read the covered part"
    # The retry: the summary instead of the covered nodes, the prompt and the task still there.
    assert "SUMMARY-ONE" in retry and big_text(0, 3)[:40] not in retry
    assert "PINNED-SYSTEM-PROMPT" in retry and "Build every module." in retry
    assert big_text(5, 3)[:40] in retry, "the newest turn is kept verbatim"
    (compaction,) = compactions(store.nodes)
    assert compaction.metadata["trigger"] == "overflow"
    assert compaction.metadata["purpose"] == "compact" and compaction.role is Role.SYSTEM
    assert loop.context.reports[-1].compaction_node_id == compaction.node_id


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_second_overflow_ends_the_run_prompt_too_long(provider: str) -> None:
    path = long_path(6, lines=3)
    overflow = s.ContextOverflow(prompt_tokens=5000, limit=4096)
    script = [overflow, s.text_turn("SUMMARY"), overflow]
    async with running(provider, script) as (server, adapter):
        end, _ = await run_path(adapter, path, config())
    assert (end.status, end.end_reason) == (RunStatus.FAILED, EndReason.PROMPT_TOO_LONG)
    assert end.error is not None and end.error.code == "context_length_exceeded"
    assert len(bodies(server)) == 3, "one compaction and one retry, no more"


# -- output limit ---------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_cut_answer_is_continued(provider: str) -> None:
    store = MemoryStore()
    script = [s.text_turn("The first half, ", reason="max_tokens"), s.text_turn("the second.")]
    async with running(provider, script) as (server, adapter):
        end, _ = await run_path(adapter, long_path(1, lines=1), config(), store=store)
    assert (end.status, end.end_reason) == (RunStatus.COMPLETED, EndReason.COMPLETED)
    _, second = bodies(server)
    assert "The first half, " in second and CONTINUE_PROMPT[:40] in second
    cut, ask, answer = store.nodes
    assert answer.content == [TextBlock(text="the second.")]
    assert cut.role is Role.ASSISTANT and cut.metadata == {"cut": "max_tokens"}
    assert ask.role is Role.USER and ask.node_type is NodeType.SYSTEM_NOTE


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_answer_still_cut_after_its_continuations_ends_recovery(provider: str) -> None:
    cut = s.text_turn("more… ", reason="max_tokens")
    agent = config(context={"max_continuations": 2})
    async with running(provider, [cut, cut, cut]) as (server, adapter):
        end, _ = await run_path(adapter, long_path(1, lines=1), agent)
    assert (end.status, end.end_reason) == (
        RunStatus.COMPLETED,
        EndReason.MAX_OUTPUT_TOKENS_RECOVERY,
    )
    assert len(bodies(server)) == 3 and end.turns == 3


# -- the summarizer fails: trim, never empty ----------------------------------------------------

_FAILING = {
    "error": ([s.ScriptedStatus(status=400)], {}, "error"),
    "timeout": (
        [s.ScriptedTurn(steps=[s.Delay(seconds=3), s.Text(text="late"), s.Finish()])],
        {"summary_timeout_s": 0.3},
        "timeout",
    ),
    "overflow": ([s.ContextOverflow(prompt_tokens=9000, limit=8192)] * 3, {}, "overflow"),
    "empty": ([s.text_turn("")], {}, "empty"),
}


@pytest.mark.parametrize("kind", sorted(_FAILING))
async def test_a_failing_summarizer_trims_and_never_empties_the_context(kind: str) -> None:
    failing, policy, reason = _FAILING[kind]
    path, store = long_path(40, lines=3), MemoryStore()
    async with running("openai", [*failing, s.text_turn("Done anyway.")]) as (server, adapter):
        end, loop = await run_path(adapter, path, config(context=policy), store=store)
    assert (end.status, end.end_reason) == (RunStatus.COMPLETED, EndReason.COMPLETED)
    (trim,) = compactions(store.nodes)
    assert (trim.metadata["method"], trim.metadata["failure"]) == ("trim", reason)
    (event,) = [p for t, p in store.events if t is EventType.CONTEXT_COMPACTED]
    assert event["failure"] == reason and event["covered"] > 0
    answer_request = bodies(server)[-1]
    assert "PINNED-SYSTEM-PROMPT" in answer_request and "Build every module." in answer_request
    assert big_text(39, 3)[:40] in answer_request, "the newest turn stays"
    assert big_text(0, 3)[:40] not in answer_request, "the oldest turns were dropped"
    report = loop.context.reports[-1]
    assert report.budget is not None and report.budget.total <= report.budget.compact_at
    assert report.compacted > 0 and len(report.node_ids) > 2


def _summary_or_done(body: Any) -> s.ScriptedTurn:
    """The summarizer's requests (its prompt in the system part) get a summary; others an end."""
    if "You compact a conversation" in json.dumps(body):
        return s.text_turn("SUMMARY")
    return s.text_turn("Done.")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_window_smaller_than_assumed_is_learned_from_the_overflow(provider: str) -> None:
    # No window configured: the unknown model is assumed to have 32,768; the server has 4,096.
    path, store = long_path(40, lines=3), MemoryStore()
    agent = config(context_window=None, max_output_tokens=512)
    overflow = s.ContextOverflow(prompt_tokens=6000, limit=4096)
    async with running(provider, [overflow]) as (server, adapter):
        server.default = _summary_or_done  # the summarizer reads in chunks that fit 4,096
        end, loop = await run_path(adapter, path, agent, store=store)
    assert (end.status, end.end_reason) == (RunStatus.COMPLETED, EndReason.COMPLETED)
    first, retried = loop.context.reports
    assert first.budget is not None and first.budget.context_window == 32_768
    assert retried.budget is not None and retried.budget.context_window == 4096
    assert retried.budget.total <= retried.budget.input_budget
    assert count_request(json.loads(bodies(server)[-1])) < 4096 - 512


@pytest.mark.parametrize("provider", ["openai", "anthropic"])  # Ollama's error names no window
async def test_a_learned_window_is_kept_for_the_next_runs(provider: str) -> None:
    """The run after the one that learned the window starts within it: no failing request."""
    agent = config(context_window=None, max_output_tokens=512)
    overflow = s.ContextOverflow(prompt_tokens=6000, limit=4096)
    async with running(provider, [overflow]) as (server, adapter):
        server.default = _summary_or_done
        await run_path(adapter, long_path(40, lines=3), agent, store=MemoryStore())
        asked = len(server.requests)
        end, loop = await run_path(adapter, long_path(4, lines=1), agent, store=MemoryStore())
    assert (end.status, end.end_reason) == (RunStatus.COMPLETED, EndReason.COMPLETED)
    (report,) = loop.context.reports
    assert report.budget is not None and report.budget.context_window == 4096
    assert len(server.requests) == asked + 1  # one request, and it fit
