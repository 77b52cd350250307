"""Consolidation through the OpenAI fake: failures fall back, updates replace, user edits win."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_core.bus import Delivery
from agent_core.bus.contracts.memory import ReadMemory, WriteMemory
from agent_core.files import FileStore
from agent_core.memory import Interaction, parse_document
from agent_core.provider import ProviderRegistry, ProviderSettings, aclose_adapter
from services.memory_extraction.consolidate import BatchItem, Consolidator
from services.memory_extraction.llm import LLMProposer
from services.memory_extraction.queries import MemoryQueries
from services.memory_extraction.store import MemoryStore, Source
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import Delay, Finish, ScriptedStatus, ScriptedTurn, Text, text_turn

ACCOUNT = "acct"
DELIVERY = Delivery("s", "0-1", 1, {})


def item(text: str, skills: list[str] | None = None) -> BatchItem:
    ix = Interaction.model_validate(
        {"turns": [{"role": "user", "content": text}], "skills": skills or []}
    )
    return BatchItem(interaction=ix, source=Source(session_id="sess_1", run_id="run_1"))


def answer(*updates: dict[str, object]) -> ScriptedTurn:
    return text_turn(json.dumps({"updates": list(updates)}, ensure_ascii=False))


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
async def proposer(server: FakeOpenAIServer) -> AsyncIterator[LLMProposer]:
    adapter = ProviderRegistry().create(
        ProviderSettings(
            provider="openai", base_url=server.sdk_base_url, api_key="sk-test-0123456789abcdef",
            max_retries=0,
        )
    )  # fmt: skip
    proposer = LLMProposer(adapter, "fake-model", timeout_s=2)
    # The SDK's first request pays one-off costs (lazy imports, the connection) that a loaded
    # machine can stretch past the 2 s deadline the timeout case relies on: pay them here.
    server.push(answer())
    await proposer.propose({}, [])
    server.requests.clear()
    yield proposer
    await aclose_adapter(adapter)


async def user_entries(store: MemoryStore) -> list[str]:
    doc = (await store.load(ACCOUNT)).documents.get("user")
    return [e.text for e in doc.entries] if doc else []


BAD_ANSWERS = {
    "http_500": ScriptedStatus(status=500),
    "not_json": text_turn("Sure! I will remember that."),
    "schema": answer({"op": "add", "scope": "user"}),  # add without text
    "unknown_scope": answer({"op": "add", "scope": "skill:nope", "text": "x"}),
    "unknown_id": answer({"op": "update", "scope": "user", "entry_id": "u9", "text": "x"}),
    "timeout": ScriptedTurn(steps=[Delay(seconds=5), Text(text="{}"), Finish()]),
}


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
async def test_an_unusable_model_answer_falls_back_to_the_rules(
    tmp_path: Path, server: FakeOpenAIServer, proposer: LLMProposer, case: str
) -> None:
    server.push(BAD_ANSWERS[case])
    store = MemoryStore(tmp_path)
    report = await Consolidator(store, proposer).consolidate(
        ACCOUNT, [item("以后日期统一用 YYYY-MM-DD 格式。")]
    )
    assert report.mode == "fallback" and report.llm_error is not None
    assert len(server.requests) == 1, report.llm_error
    assert [t for t in await user_entries(store) if "YYYY-MM-DD" in t]


async def test_no_signal_means_no_model_call(
    tmp_path: Path, server: FakeOpenAIServer, proposer: LLMProposer
) -> None:
    report = await Consolidator(MemoryStore(tmp_path), proposer).consolidate(
        ACCOUNT, [item("What is the revenue of Q3?")]
    )
    assert report.mode == "skipped" and server.requests == []


@pytest.mark.parametrize("mode", ["fallback", "llm"])
async def test_repeated_preference_is_one_entry_and_a_change_keeps_only_the_new_value(
    files: FileStore, server: FakeOpenAIServer, proposer: LLMProposer, mode: str
) -> None:
    store = MemoryStore(files)
    consolidator = Consolidator(store, proposer if mode == "llm" else None)
    if mode == "llm":
        first = {"op": "add", "scope": "user", "entry_id": "u1", "slot": "currency=usd",
                 "text": "Always show amounts in USD"}  # fmt: skip
        server.push(
            answer(first),
            answer(first),  # a model repeating itself: the guard turns it into "none"
            answer(
                {
                    "op": "update",
                    "scope": "user",
                    "entry_id": "u1",
                    "slot": "currency=eur",
                    "text": "Always show amounts in EUR",
                }
            ),  # fmt: skip
        )
    for text in ("Always show amounts in USD.", "Always show amounts in USD.",
                 "From now on, always show amounts in EUR."):  # fmt: skip
        report = await consolidator.consolidate(ACCOUNT, [item(text)])
        assert report.mode == mode
    entries = await user_entries(store)
    assert len(entries) == 1, entries
    assert "EUR" in entries[0] and "USD" not in entries[0]
    log = await store.read_log(ACCOUNT)
    assert [r["op"] for r in log] == ["add", "update"]
    assert log[0]["sources"] == [{"session_id": "sess_1", "run_id": "run_1"}]


async def test_a_user_edit_made_while_the_model_thinks_survives(
    files: FileStore, server: FakeOpenAIServer, proposer: LLMProposer
) -> None:
    store = MemoryStore(files)
    queries = MemoryQueries(store)
    seeded = "---\nscope: user\n---\n- 金额单位用万元 <!-- id:u1 -->\n- 回复用中文 <!-- id:u2 -->\n"
    await store.write(ACCOUNT, "user", seeded, version=None)
    server.push(
        ScriptedTurn(
            steps=[
                Delay(seconds=0.6),  # the user edits while this answer is on its way
                Text(text=json.dumps({"updates": [
                    {"op": "update", "scope": "user", "entry_id": "u1", "text": "金额单位用亿元"},
                    {"op": "add", "scope": "user", "entry_id": "u3", "text": "日期用 YYYY-MM-DD"},
                ]}, ensure_ascii=False)),
                Finish(),
            ]
        )
    )  # fmt: skip
    task = asyncio.create_task(
        Consolidator(store, proposer).consolidate(
            ACCOUNT, [item("以后金额单位用亿元，日期用 YYYY-MM-DD。")]
        )
    )
    await server.wait_for_requests(1)
    edited = seeded.replace("万元", "千元") + "- 图表不要用饼图\n"
    reply = await queries.handle(
        WriteMemory(account_id=ACCOUNT, scope="user", content=edited,
                    if_match=(await queries.read(ReadMemory(account_id=ACCOUNT, scope="user"))).etag),
        DELIVERY,
    )  # fmt: skip
    assert reply.ok, reply.error
    report = await task
    assert report.mode == "llm" and report.merged_again
    text = await store.read_raw(ACCOUNT, "user")
    assert text is not None
    entries = [e.text for e in parse_document(text.decode(), scope="user").entries]
    assert "金额单位用千元" in entries  # the user's edit of u1 won over the model's update
    assert "图表不要用饼图" in entries  # the user's new bullet is kept
    assert "回复用中文" in entries
    assert "日期用 YYYY-MM-DD" in entries  # the model's addition still lands
    assert not any("亿元" in e for e in entries)
    notes = [r.get("note") for r in await store.read_log(ACCOUNT)]
    assert "user edit wins" in notes
