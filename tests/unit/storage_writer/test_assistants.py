"""Named agents in the writer: create, duplicate names, versions, archive, repeats, scoping."""

from __future__ import annotations

import sqlite3

import pytest

from agent_core.bus.contracts.assistants import (
    ArchiveAssistant,
    CreateAssistant,
    GetAssistant,
    ListAssistants,
    ListAssistantVersions,
    UpdateAssistant,
)
from agent_core.ids import new_id
from agent_core.types.api import Assistant, AssistantDefinition
from services.storage_writer import apply_assistants
from services.storage_writer.queries import QueryEngine
from services.storage_writer.writer import Writer


def _create(
    name: str = "reviewer", account: str = "acct_a", **definition: object
) -> CreateAssistant:
    return CreateAssistant(
        command_id=new_id("cmd"),
        account_id=account,
        assistant_id=new_id("asst"),
        name=name,
        definition=AssistantDefinition.model_validate(
            {"instructions": "review v1", "config": {"max_turns": 5}, **definition}
        ),
    )


def _update(c: CreateAssistant, instructions: str, **kw: object) -> UpdateAssistant:
    return UpdateAssistant(
        command_id=new_id("cmd"),
        account_id=c.account_id,
        assistant_id=c.assistant_id,
        definition=AssistantDefinition(instructions=instructions),
        **kw,  # type: ignore[arg-type]
    )


def _get(engine: QueryEngine, account: str, **kw: object) -> Assistant | None:
    reply = engine.answer(GetAssistant(account_id=account, **kw))  # type: ignore[arg-type]
    assert reply.ok
    return None if reply.data is None else Assistant.model_validate(reply.data)


def test_create_then_read_by_name_and_id(writer: Writer, engine: QueryEngine) -> None:
    c = _create()
    [r] = writer.apply_batch([c])
    assert r.ok and r.result["version"] == 1 and r.result["assistant_id"] == c.assistant_id
    by_name = _get(engine, "acct_a", name="reviewer")
    by_id = _get(engine, "acct_a", assistant_id=c.assistant_id)
    assert by_name is not None and by_name == by_id
    assert by_name.instructions == "review v1" and by_name.config.max_turns == 5
    assert (by_name.version, by_name.latest_version, by_name.status) == (1, 1, "active")
    assert by_name.overridable == ["max_turns", "model", "temperature"]


def test_an_account_has_one_active_assistant_of_a_name(writer: Writer, engine: QueryEngine) -> None:
    first, again = _create(), _create()
    other_account = _create(account="acct_b")
    r1, r2, r3 = writer.apply_batch([first, again, other_account])
    assert r1.ok and r3.ok
    assert not r2.ok and r2.error is not None and r2.error.code == "assistant_exists"
    assert _get(engine, "acct_a", assistant_id=again.assistant_id) is None  # nothing written


def test_update_makes_the_next_version_and_keeps_the_old(
    writer: Writer, engine: QueryEngine
) -> None:
    c = _create()
    writer.apply_batch([c])
    [u] = writer.apply_batch([_update(c, "review v2", expected_version=1)])
    assert u.ok and u.result["version"] == 2
    latest = _get(engine, "acct_a", name="reviewer")
    old = _get(engine, "acct_a", name="reviewer", version=1)
    assert latest is not None and old is not None
    assert (latest.version, latest.instructions) == (2, "review v2")
    assert (old.version, old.latest_version, old.instructions) == (1, 2, "review v1")
    assert _get(engine, "acct_a", name="reviewer", version=3) is None
    versions = engine.answer(
        ListAssistantVersions(account_id="acct_a", assistant_id=c.assistant_id)
    )
    assert [v["version"] for v in versions.data["items"]] == [1, 2]
    # A stale expected version is refused and writes nothing.
    [stale] = writer.apply_batch([_update(c, "lost", expected_version=1)])
    assert not stale.ok and stale.error is not None and stale.error.code == "version_mismatch"
    assert stale.error.details["current_version"] == 2
    latest = _get(engine, "acct_a", name="reviewer")
    assert latest is not None and latest.version == 2


def test_archive_hides_the_name_and_keeps_the_versions(writer: Writer, engine: QueryEngine) -> None:
    c = _create()
    writer.apply_batch([c])
    archive = ArchiveAssistant(
        command_id=new_id("cmd"), account_id="acct_a", assistant_id=c.assistant_id
    )
    [a] = writer.apply_batch([archive])
    assert a.ok and a.result["status"] == "archived"
    assert _get(engine, "acct_a", name="reviewer") is None
    kept = _get(engine, "acct_a", assistant_id=c.assistant_id)
    assert kept is not None and kept.status == "archived" and kept.instructions == "review v1"
    assert engine.answer(ListAssistants(account_id="acct_a")).data == []
    listed = engine.answer(ListAssistants(account_id="acct_a", include_archived=True)).data
    assert [x["assistant_id"] for x in listed] == [c.assistant_id]
    [upd] = writer.apply_batch([_update(c, "after")])
    assert not upd.ok and upd.error is not None and upd.error.code == "assistant_archived"
    # The name is free again.
    [again] = writer.apply_batch([_create()])
    assert again.ok


def test_a_repeated_command_gets_its_first_result_and_changes_nothing(
    writer: Writer, engine: QueryEngine
) -> None:
    c = _create()
    [first] = writer.apply_batch([c])
    [repeat] = writer.apply_batch([c])
    assert repeat.ok and repeat.duplicate and repeat.result == first.result
    u = _update(c, "review v2")
    [u1] = writer.apply_batch([u])
    [u2] = writer.apply_batch([u])
    assert u2.duplicate and u2.result == u1.result == {**u1.result, "version": 2}
    latest = _get(engine, "acct_a", name="reviewer")
    assert latest is not None and latest.version == 2  # not 3


def test_another_account_sees_and_changes_nothing(writer: Writer, engine: QueryEngine) -> None:
    c = _create()
    writer.apply_batch([c])
    assert _get(engine, "acct_b", assistant_id=c.assistant_id) is None
    assert _get(engine, "acct_b", name="reviewer") is None
    assert engine.answer(ListAssistants(account_id="acct_b")).data == []
    versions = ListAssistantVersions(account_id="acct_b", assistant_id=c.assistant_id)
    assert engine.answer(versions).data is None
    foreign_update = _update(c, "hijack").model_copy(update={"account_id": "acct_b"})
    foreign_archive = ArchiveAssistant(
        command_id=new_id("cmd"), account_id="acct_b", assistant_id=c.assistant_id
    )
    for receipt in writer.apply_batch([foreign_update, foreign_archive]):
        assert not receipt.ok and receipt.error is not None
        assert receipt.error.code == "assistant_not_found"
    mine = _get(engine, "acct_a", name="reviewer")
    assert mine is not None and (mine.version, mine.status) == (1, "active")


def test_an_accounts_assistants_live_in_its_shard(sqlite_writer: Writer) -> None:
    writer = sqlite_writer
    c = _create()
    writer.apply_batch([c])
    shard = writer.layout.shard_of_account("acct_a")
    for i, path in enumerate(writer.layout.paths()):
        conn = sqlite3.connect(path)
        try:
            (count,) = conn.execute("SELECT count(*) FROM assistants").fetchone()
        finally:
            conn.close()
        assert count == (1 if i == shard else 0)


def test_an_account_has_a_bounded_number_of_active_assistants(
    writer: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apply_assistants, "MAX_ACTIVE_ASSISTANTS", 2)
    receipts = writer.apply_batch([_create(f"a{i}") for i in range(3)])
    assert [r.ok for r in receipts] == [True, True, False]
    assert receipts[2].error is not None and receipts[2].error.code == "too_many_assistants"
    assert writer.apply_batch([_create("other", account="acct_b")])[0].ok  # per account
