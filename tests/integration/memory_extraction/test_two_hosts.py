"""Two memory-extraction processes (two hosts) on one account's files, on each engine: the
conditional writes keep every edit. Each "host" is a client of its own on the same store, with
its own in-process lock; a gate holds one host's write until the other has written, which is
the race the conditional write exists for."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence

from agent_core.bus import Delivery
from agent_core.bus.contracts.memory import ReadMemory, WriteMemory
from agent_core.files import Download, FileStore, StoredObject, VersionConflict
from agent_core.memory import Interaction, parse_document
from services.memory_extraction.consolidate import BatchItem, Consolidator
from services.memory_extraction.queries import MemoryQueries
from services.memory_extraction.store import MemoryStore, Source
from tests.integration.memory_extraction.conftest import OpenFiles

ACCOUNT = "acct_race"
DELIVERY = Delivery("s", "0-1", 1, {})
SEEDED = "---\nscope: user\n---\n- 金额单位用万元 <!-- id:u1 -->\n"


class Gate:
    """A host's client of the store whose first write of ``user.md`` waits for ``release``
    (after setting ``reached``); counts the conflicts the store answered."""

    def __init__(self, inner: FileStore) -> None:
        self.inner = inner
        self.engine = inner.engine
        self.reached, self.release = asyncio.Event(), asyncio.Event()
        self.conflicts = 0

    async def put(
        self,
        key: str,
        data: bytes,
        *,
        if_match: str | None = None,
        if_absent: bool = False,
        sync: bool = True,
    ) -> str | None:
        if key.endswith("/user.md") and not self.reached.is_set():
            self.reached.set()
            await self.release.wait()
        try:
            return await self.inner.put(
                key, data, if_match=if_match, if_absent=if_absent, sync=sync
            )
        except VersionConflict:
            self.conflicts += 1
            raise

    async def append_lines(self, key: str, data: bytes) -> None:
        await self.inner.append_lines(key, data)

    async def check(self) -> None:
        await self.inner.check()

    def put_blocking(self, key: str, data: bytes) -> None:
        self.inner.put_blocking(key, data)

    async def upload(self, key: str, chunks: AsyncIterator[bytes]) -> int:
        return await self.inner.upload(key, chunks)

    async def get(self, key: str) -> tuple[bytes, str | None]:
        return await self.inner.get(key)

    async def get_many(self, keys: Sequence[str]) -> list[tuple[bytes, str | None] | None]:
        return await self.inner.get_many(keys)

    async def open(self, key: str) -> Download:
        return await self.inner.open(key)

    async def head(self, key: str) -> StoredObject | None:
        return await self.inner.head(key)

    async def list(self, prefix: str, *, limit: int) -> list[StoredObject]:
        return await self.inner.list(prefix, limit=limit)

    async def delete(self, keys: Iterable[str]) -> None:
        await self.inner.delete(keys)

    async def delete_prefix(self, prefix: str) -> None:
        await self.inner.delete_prefix(prefix)

    def delete_prefix_blocking(self, prefix: str) -> None:
        self.inner.delete_prefix_blocking(prefix)

    async def close(self) -> None:
        await self.inner.close()


def item(text: str) -> BatchItem:
    ix = Interaction.model_validate({"turns": [{"role": "user", "content": text}]})
    return BatchItem(interaction=ix, source=Source(session_id="sess_1", run_id="run_1"))


async def entries(store: MemoryStore) -> list[str]:
    data = await store.read_raw(ACCOUNT, "user")
    assert data is not None
    return [e.text for e in parse_document(data.decode(), scope="user").entries]


async def test_two_extractors_racing_on_one_file_both_land(open_files: OpenFiles) -> None:
    seed = MemoryStore(open_files())
    await seed.write(ACCOUNT, "user", SEEDED, version=None)
    gate = Gate(open_files())
    host_a, host_b = MemoryStore(gate), MemoryStore(open_files())
    a = asyncio.create_task(
        Consolidator(host_a).consolidate(ACCOUNT, [item("以后日期都用 YYYY-MM-DD。")])
    )
    await gate.reached.wait()  # host A merged and is about to write over the seeded version
    b = await Consolidator(host_b).consolidate(
        ACCOUNT, [item("From now on, always reply in English.")]
    )
    assert b.written == ["user"]
    gate.release.set()
    report = await a
    assert report.written == ["user"] and report.merged_again
    found = await entries(seed)
    assert "金额单位用万元" in found
    assert any("YYYY-MM-DD" in e for e in found), found  # A's edit
    assert any("English" in e for e in found), found  # B's edit, not overwritten by A
    logged = [r["new_text"] for r in await seed.read_log(ACCOUNT) if r["op"] == "add"]
    assert len(logged) == 2 and any("English" in t for t in logged)
    assert gate.conflicts == 1  # A's first write named a version B had replaced


async def test_a_user_edit_on_one_host_wins_over_an_extractor_on_another(
    open_files: OpenFiles,
) -> None:
    api = MemoryQueries(MemoryStore(open_files()))
    await api.store.write(ACCOUNT, "user", SEEDED, version=None)
    gate = Gate(open_files())
    extractor = asyncio.create_task(
        Consolidator(MemoryStore(gate)).consolidate(ACCOUNT, [item("以后日期都用 YYYY-MM-DD。")])
    )
    await gate.reached.wait()  # the extractor read the seeded file and is about to write
    read = await api.read(ReadMemory(account_id=ACCOUNT, scope="user"))
    edited = read.content.replace("万元", "千元") + "- 图表不要用饼图\n"
    reply = await api.handle(
        WriteMemory(account_id=ACCOUNT, scope="user", content=edited, if_match=read.etag),
        DELIVERY,
    )
    assert reply.ok, reply.error
    gate.release.set()
    report = await extractor
    assert report.written == ["user"]
    found = await entries(api.store)
    assert "金额单位用千元" in found and "图表不要用饼图" in found  # the user's edit stays
    assert "金额单位用万元" not in found
    assert any("YYYY-MM-DD" in e for e in found), found  # the extractor's addition still lands
    assert gate.conflicts == 1
    # The user's If-Match names what they read: one read before the extractor's write is stale.
    stale = await api.handle(
        WriteMemory(account_id=ACCOUNT, scope="user", content=SEEDED, if_match=read.etag),
        DELIVERY,
    )
    assert not stale.ok and stale.error is not None
    assert stale.error.code == "precondition_failed"
