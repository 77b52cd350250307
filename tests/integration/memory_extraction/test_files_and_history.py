"""Memory files as the API sees them: exact user text, listing, history and restore, on each
engine of the file store (the home's folders and a real S3-compatible server)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from agent_core.bus import Delivery
from agent_core.bus.contracts.memory import (
    ListMemory,
    MemoryHistory,
    MemoryQuery,
    MemoryReply,
    ReadMemory,
    RenderMemory,
    RestoreMemory,
    WriteMemory,
)
from agent_core.files import FileStore
from agent_core.memory import Interaction
from agent_core.memory.client import MemoryFiles, MemoryHistoryView
from agent_core.memory.injection import render_injection
from agent_core.memory.views import RenderedMemory
from services.memory_extraction import queries as queries_module
from services.memory_extraction import store as store_module
from services.memory_extraction.consolidate import BatchItem, Consolidator
from services.memory_extraction.queries import MemoryQueries
from services.memory_extraction.store import MemoryStore, Source

ACCOUNT = "acct_files"
DELIVERY = Delivery("s", "0-1", 1, {})
USER_TEXT = """# What I want
Short answers please.

* Dates as DD/MM/YYYY (I'm in the UK).
-   Amounts in thousands
    with one decimal
"""


async def ask(queries: MemoryQueries, query: MemoryQuery) -> object:
    reply = await queries.handle(query, DELIVERY)
    assert reply.ok, reply.error
    return MemoryReply.model_validate_json(reply.model_dump_json()).data  # as it travels


def body(text: str) -> str:
    return text.split("\n---\n", 1)[1] if text.startswith("---\n") else text


async def consolidate(store: MemoryStore, text: str, skills: list[str] | None = None) -> None:
    ix = Interaction.model_validate({"turns": [{"role": "user", "content": text}],
                                     "skills": skills or []})  # fmt: skip
    item = BatchItem(interaction=ix, source=Source(session_id="sess_1", run_id="run_1"))
    await Consolidator(store).consolidate(ACCOUNT, [item])


async def test_user_edits_keep_their_exact_text_through_consolidations(files: FileStore) -> None:
    store = MemoryStore(files)
    queries = MemoryQueries(store)
    written = await ask(queries, WriteMemory(account_id=ACCOUNT, scope="user",
                                             content=USER_TEXT, if_match=None))  # fmt: skip
    assert isinstance(written, dict) and body(written["content"]) == USER_TEXT
    await consolidate(store, "From now on, always reply in English.")
    await consolidate(store, "以后金额都用欧元。")
    after = await store.read_raw(ACCOUNT, "user")
    assert after is not None
    text = body(after.decode())
    assert text.startswith(USER_TEXT)  # every line the user wrote, byte for byte
    assert "always reply in English" in text and "欧元" in text
    assert "<!--" not in text


async def test_the_listing_names_the_files_there_and_nothing_kept_beside_them(
    files: FileStore,
) -> None:
    """Only files that exist are listed (no user file: none listed), skills sorted, and nothing
    under the versions kept beside them or the change log reads as a file."""
    store = MemoryStore(files)
    queries = MemoryQueries(store)
    await consolidate(store, "Always use bar charts by default.", ["chart"])
    await consolidate(store, "From now on use line charts by default.", ["chart"])
    await consolidate(store, "Always start every report with a one-line summary.", ["report"])
    listed = MemoryFiles.model_validate(await ask(queries, ListMemory(account_id=ACCOUNT)))
    assert [f.scope for f in listed.files] == ["skill:chart", "skill:report"]
    assert await store.scopes(ACCOUNT) == ["skill:chart", "skill:report"]
    await consolidate(store, "以后回复都用中文。")
    listed = MemoryFiles.model_validate(await ask(queries, ListMemory(account_id=ACCOUNT)))
    assert [f.scope for f in listed.files] == ["user", "skill:chart", "skill:report"]
    assert await store.scopes(ACCOUNT) == ["user", "skill:chart", "skill:report"]


async def test_listing_history_and_restore(files: FileStore) -> None:
    store = MemoryStore(files)
    queries = MemoryQueries(store)
    await consolidate(store, "Always use bar charts by default.", ["chart"])
    await consolidate(store, "From now on use line charts by default.", ["chart"])
    await consolidate(store, "以后回复都用中文。")
    files = MemoryFiles.model_validate(await ask(queries, ListMemory(account_id=ACCOUNT)))
    assert [(f.scope, f.entries) for f in files.files] == [("user", 1), ("skill:chart", 1)]

    history = MemoryHistoryView.model_validate(
        await ask(queries, MemoryHistory(account_id=ACCOUNT, scope="skill:chart"))
    )
    newest, first = history.versions[0], history.versions[-1]
    assert newest.current and not first.current and first.restorable
    assert [c.op for c in newest.changes] == ["update"]
    assert "bar" in (newest.changes[0].old_text or "")  # the change log keeps the old value
    assert newest.changes[0].session_ids == ["sess_1"]

    current = await ask(queries, ReadMemory(account_id=ACCOUNT, scope="skill:chart"))
    assert isinstance(current, dict)
    assert first.version is not None
    restored = await ask(queries, RestoreMemory(account_id=ACCOUNT, scope="skill:chart",
                                                version=first.version,
                                                if_match=current["etag"]))  # fmt: skip
    assert isinstance(restored, dict) and "bar charts" in restored["content"]
    again = MemoryHistoryView.model_validate(
        await ask(queries, MemoryHistory(account_id=ACCOUNT, scope="skill:chart"))
    )
    assert again.versions[0].mode == "restore" and again.versions[0].current


async def test_restore_refuses_a_stale_etag_and_an_unknown_version(files: FileStore) -> None:
    store = MemoryStore(files)
    queries = MemoryQueries(store)
    await consolidate(store, "以后日期都用 YYYY-MM-DD。")
    history = MemoryHistoryView.model_validate(
        await ask(queries, MemoryHistory(account_id=ACCOUNT, scope="user"))
    )
    version = history.versions[0].version
    assert version is not None
    stale = await queries.handle(
        RestoreMemory(account_id=ACCOUNT, scope="user", version=version, if_match="0" * 32),
        DELIVERY,
    )
    assert not stale.ok and stale.error is not None
    assert stale.error.code == "precondition_failed"
    unknown = await queries.handle(
        RestoreMemory(account_id=ACCOUNT, scope="user", version="f" * 32, if_match=None),
        DELIVERY,
    )
    assert not unknown.ok and unknown.error is not None
    assert unknown.error.code == "memory_version_not_found"


async def test_a_torn_version_copy_is_not_offered_for_restore(files: FileStore) -> None:
    """Version copies are written without an fsync (their name is their bytes' hash): one that a
    crash left torn does not match its name, and is neither restorable nor restored."""
    store = MemoryStore(files)
    queries = MemoryQueries(store)
    await consolidate(store, "以后日期都用 YYYY-MM-DD。")
    await consolidate(store, "以后回复都用中文。")
    history = MemoryHistoryView.model_validate(
        await ask(queries, MemoryHistory(account_id=ACCOUNT, scope="user"))
    )
    first = history.versions[-1]
    assert first.version is not None and first.restorable
    copy = f"{store.memory_key(ACCOUNT)}/{store_module.VERSIONS}/user/{first.version}.md"
    whole = (await files.get(copy))[0]
    await files.put(copy, whole[: len(whole) // 2])  # what a crash may leave of it
    torn = MemoryHistoryView.model_validate(
        await ask(queries, MemoryHistory(account_id=ACCOUNT, scope="user"))
    )
    assert not torn.versions[-1].restorable and torn.versions[0].restorable
    current = await ask(queries, ReadMemory(account_id=ACCOUNT, scope="user"))
    assert isinstance(current, dict)
    refused = await queries.handle(
        RestoreMemory(
            account_id=ACCOUNT, scope="user", version=first.version, if_match=current["etag"]
        ),
        DELIVERY,
    )
    assert not refused.ok and refused.error is not None
    assert refused.error.code == "memory_version_not_found"


async def test_a_render_is_made_again_only_when_a_file_changed(
    files: FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore(files)
    queries = MemoryQueries(store)
    made: list[str] = []

    def counted(user: Any, skills: Any, language: Any = None) -> str:
        text = render_injection(user, skills, language)
        made.append(text)
        return text

    monkeypatch.setattr(queries_module, "render_injection", counted)
    await consolidate(store, "Always use bar charts by default.", ["chart"])
    render = RenderMemory(account_id=ACCOUNT, skills=["chart"])
    first = RenderedMemory.model_validate(await ask(queries, render))
    again = RenderedMemory.model_validate(await ask(queries, render))
    assert again.text == first.text and "bar charts" in first.text and len(made) == 1
    # Another set of skills is another block.
    bare = RenderedMemory.model_validate(
        await ask(queries, RenderMemory(account_id=ACCOUNT, skills=[]))
    )
    assert "bar charts" not in bare.text and len(made) == 2
    # A user's edit changes the file's ETag: the next render shows it.
    await ask(queries, WriteMemory(account_id=ACCOUNT, scope="user",
                                   content=USER_TEXT, if_match=None))  # fmt: skip
    edited = RenderedMemory.model_validate(await ask(queries, render))
    assert "Short answers please." in edited.text and "bar charts" in edited.text
    assert len(made) == 3


async def test_old_versions_are_pruned_in_batches_and_the_newest_kept(
    open_files: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two stores (two processes) writing one file: the folder of versions never holds more
    than ``KEEP_VERSIONS + PRUNE_SLACK`` per writer and never fewer than ``KEEP_VERSIONS``, and
    it is listed once per ``PRUNE_SLACK`` writes, not at every write."""
    monkeypatch.setattr(store_module, "KEEP_VERSIONS", 4)
    monkeypatch.setattr(store_module, "PRUNE_SLACK", 3)
    files = open_files()
    listed: list[str] = []
    listing = files.list

    async def counted(prefix: str, **kw: Any) -> Any:
        listed.append(prefix)
        return await listing(prefix, **kw)

    monkeypatch.setattr(files, "list", counted)
    one, other = MemoryStore(files), MemoryStore(open_files())
    folder = f"{one.memory_key(ACCOUNT)}/.versions/user"
    tags: list[str] = []
    version: str | None = None
    for i in range(20):
        writer = one if i % 5 else other  # the second process writes now and then
        tag, version = await writer.write(ACCOUNT, "user", f"* rule {i}\n", version=version)
        tags.append(tag)
        held = [o.key for o in await listing(folder, limit=1000)]
        assert min(i + 1, 4) <= len(held) <= 4 + 2 * 3, (i, len(held))
        assert f"{folder}/{tag}.md" in held  # the version just written is always kept
    # One store's writes (16 here) listed the folder on its first write and once per 3 writes
    # after that: 6 listings, where listing at every write made 16.
    assert len([p for p in listed if p == folder]) <= 1 + 16 // 3


async def test_a_store_keeps_what_it_caches_bounded(
    files: FileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parsed files and versions folders: the last ``CACHED_FILES`` used, the oldest dropped
    (and parsed or listed again when used again); an account's lock lives while referenced."""
    monkeypatch.setattr(store_module, "CACHED_FILES", 2)
    store = MemoryStore(files)
    data = b"* Short answers please.\n"
    one = store.document("acct_1", "user", data)
    two = store.document("acct_2", "user", data)
    assert store.document("acct_1", "user", data) is one  # cached; acct_2 is now the oldest
    store.document("acct_3", "user", data)
    assert store.document("acct_1", "user", data) is one
    assert store.document("acct_2", "user", data) is not two  # dropped, parsed again
    assert len(store._parsed) == 2
    for account in ("acct_1", "acct_2", "acct_3"):
        await store.write(account, "user", "* rule\n", version=None)
    assert store._kept.keys() == [
        f"{store.memory_key(a)}/.versions/user" for a in ("acct_2", "acct_3")
    ]
    lock = store.lock("acct_1")
    async with lock:
        assert store.lock("acct_1") is lock and store.lock("acct_1").locked()
    del lock
    gc.collect()
    assert "acct_1" not in store._locks
