"""Task lists in the file store (the ``s3`` engine): one object per acknowledged group, written
create-only, so any task-wal instance can replay a list and only one can extend it.

Keys: ``task-wal/<session_id>/<stem>/<seq>.wal`` where ``seq`` (12 digits, zero-padded so the
store's key order is the log's order) is the list's last acknowledged sequence number plus one:
the first record the object holds. An object is ``<n>\\n``, ``n`` bytes of request-log lines (as
in ``<stem>.requests.jsonl``), then the group's WAL records (as in ``<stem>.wal.jsonl``).

Guarantees, against the local files':

- *durability*: a group is acknowledged only after the store answered its PUT (an S3 PUT is
  durable when it answers);
- *no torn tail*: an object is written whole or not at all, so a crash mid-append leaves the log
  as of the last acknowledged group (the local engine truncates a torn line instead);
- *one owner*: the PUT is ``If-None-Match: *``. Two instances holding the same state compute the
  same key; the store lets exactly one create it. The loser's list is dropped from its memory and
  its commands get the retryable ``task_wal_owner_changed``: the retry (same request id) replays
  the list from the store, sees the winner's records and applies on top of them, or answers
  ``duplicate`` if the winner applied that very request. Fencing without a lock service.

Replay lists the list's keys and reads them in order (16 at a time) through the same
:func:`~agent_core.tasks.replay` as a file, so a corrupt record makes the list unavailable as on
disk. Compaction: once a list has :data:`COMPACT_AFTER` group objects past its latest snapshot,
its owner writes ``<seq>.snap`` (same format: every request line and record up to ``seq``),
create-only as well (any instance would write the same bytes). Replay then reads the latest
snapshot and the groups after it. Covered groups are kept, not deleted: their keys are what
refuses a stale owner's append (a freed key would let it write a group replay then skips), and an
instance replaying at that moment may still be reading them.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Final

from agent_core.errors import AgentCoreError, StorageError
from agent_core.files import FileStore
from agent_core.files.port import FileStoreError
from agent_core.tasks import replay
from services.task_wal.location import STORE_ROOT, ListLocation
from services.task_wal.store import ListState, ListWrite, TaskStore, WriteFailures
from services.task_wal.walfile import parse_requests

__all__ = ["COMPACT_AFTER", "ObjectTaskStore", "encode_object", "object_key"]

log = logging.getLogger("soong.task_wal")

_OBJECT_SUFFIX: Final = ".wal"
_SNAPSHOT_SUFFIX: Final = ".snap"
COMPACT_AFTER: Final = 128  # group objects past the latest snapshot before the next one
_SEQ_DIGITS: Final = 12
_MAX_OBJECTS: Final = 1_000_000
_PARALLEL_READS: Final = 16


def _prefix(loc: ListLocation) -> str:
    return f"{STORE_ROOT}/{loc.session_id}/{loc.stem}"


def object_key(loc: ListLocation, first_seq: int) -> str:
    """The key of the group whose first record is ``first_seq``."""
    return f"{_prefix(loc)}/{first_seq:0{_SEQ_DIGITS}d}{_OBJECT_SUFFIX}"


def _snapshot_key(loc: ListLocation, last_seq: int) -> str:
    return f"{_prefix(loc)}/{last_seq:0{_SEQ_DIGITS}d}{_SNAPSHOT_SUFFIX}"


def _seq_of(key: str) -> int:
    return int(key.rsplit("/", 1)[-1].split(".", 1)[0])


def _to_read(keys: list[str]) -> list[str]:
    """The latest snapshot (if any) and the group objects after it, in log order."""
    snaps = [k for k in keys if k.endswith(_SNAPSHOT_SUFFIX)]
    covered = max((_seq_of(k) for k in snaps), default=0)
    groups = sorted(
        (k for k in keys if k.endswith(_OBJECT_SUFFIX) and _seq_of(k) > covered), key=_seq_of
    )
    return [k for k in snaps if _seq_of(k) == covered][:1] + groups


def encode_object(wal: bytes, requests: bytes) -> bytes:
    """One group as stored (module docstring)."""
    return b"%d\n" % len(requests) + requests + wal


def _decode_object(data: bytes) -> tuple[bytes, bytes]:
    """(request-log lines, WAL records) of one object; an unreadable header is all WAL (so that
    replay reports it as corrupt rather than this module guessing)."""
    head, _, rest = data.partition(b"\n")
    try:
        n = int(head)
    except ValueError:
        return b"", data
    return rest[:n], rest[n:]


class ObjectTaskStore(TaskStore):
    """:class:`TaskStore` whose lists live in ``files`` (module docstring)."""

    def __init__(self, files: FileStore) -> None:
        super().__init__(fsync=True)  # a PUT's answer is the durability point; no fsync to skip
        self.files = files
        self._reads = asyncio.Semaphore(_PARALLEL_READS)
        self._since_snapshot: dict[Path, int] = {}  # group objects past the latest snapshot

    async def get(self, loc: ListLocation) -> ListState:
        """The list at ``loc``, replayed from the store on first use (``FileStoreError`` when the
        store cannot be read: retryable)."""
        state = self._lists.get(loc.wal)
        if state is None:
            loaded = await self._load(loc)
            state = self._lists.setdefault(loc.wal, loaded)
        return state

    async def _load(self, loc: ListLocation) -> ListState:
        state, groups = await self._read(loc)
        self._since_snapshot[loc.wal] = groups
        return state

    async def _read(self, loc: ListLocation) -> tuple[ListState, int]:
        """The list as the store holds it, and how many group objects follow its snapshot."""
        objects = await self.files.list(_prefix(loc), limit=_MAX_OBJECTS)
        keys = _to_read([o.key for o in objects])

        async def read(key: str) -> bytes:
            async with self._reads:
                data, _ = await self.files.get(key)
            return data

        parts = [_decode_object(d) for d in await asyncio.gather(*(read(k) for k in keys))]
        result = replay(b"".join(wal for _, wal in parts))
        seq = result.dag.seq if result.dag is not None else 0
        requests = parse_requests(b"".join(r for r, _ in parts), max_seq=seq)
        groups = sum(k.endswith(_OBJECT_SUFFIX) for k in keys)
        return ListState(loc, result.dag, None, result.corruption, requests), groups

    async def session_lists(self, session_id: str, directory: Path) -> list[ListState]:
        """Every list of a session in the store, by stem."""
        objects = await self.files.list(f"{STORE_ROOT}/{session_id}", limit=_MAX_OBJECTS)
        # Keys are task-wal/<session>/<stem>/<object>: the stem is the third part.
        stems = sorted({o.key.split("/")[2] for o in objects if o.key.count("/") == 3})
        locations = [ListLocation.at(session_id, directory, stem) for stem in stems]
        return [await self.get(loc) for loc in locations]

    async def write(self, writes: list[ListWrite]) -> WriteFailures:
        """One create-only PUT per list, concurrently; a list another instance extended first
        fails with ``task_wal_owner_changed`` (retryable), a store that is down with its error."""

        async def put(state: ListState, wal: bytes, requests: bytes) -> AgentCoreError | None:
            first = (state.dag.seq if state.dag is not None else 0) + 1
            try:
                await self.files.put(
                    object_key(state.location, first), encode_object(wal, requests), if_absent=True
                )
            except FileStoreError as exc:
                if exc.code != "file_changed":
                    return exc
                return StorageError(
                    "task_wal_owner_changed",
                    f"task list {state.location.stem!r} was changed by another task-wal "
                    "instance; it is read again on the next try",
                    retryable=True,
                )
            return None

        errors = await asyncio.gather(*(put(*w) for w in writes))
        failures: WriteFailures = {
            w[0].location.wal: e for w, e in zip(writes, errors, strict=True) if e
        }
        for state, _, _ in writes:
            if state.location.wal in failures:
                continue
            since = self._since_snapshot.get(state.location.wal, 0) + 1
            self._since_snapshot[state.location.wal] = since
            if since >= COMPACT_AFTER:
                await self._compact(state.location)
        return failures

    async def _compact(self, loc: ListLocation) -> None:
        """Write the list's snapshot; best effort (a failure only leaves replay longer)."""
        try:
            objects = await self.files.list(_prefix(loc), limit=_MAX_OBJECTS)
            keys = _to_read([o.key for o in objects])
            data = [await self.files.get(k) for k in keys]
            parts = [_decode_object(d) for d, _ in data]
            wal = b"".join(w for _, w in parts)
            last = replay(wal)
            if last.dag is None or last.corruption is not None:
                return
            body = encode_object(wal, b"".join(r for r, _ in parts))
            await self.files.put(_snapshot_key(loc, last.dag.seq), body, if_absent=True)
            self._since_snapshot[loc.wal] = 0
        except FileStoreError as exc:  # file_changed: another instance wrote the same snapshot
            if exc.code == "file_changed":
                self._since_snapshot[loc.wal] = 0
            else:
                log.warning("task list %s: no snapshot now: %s", loc.stem, exc.message)

    def forget(self, state: ListState) -> None:
        """Drop a list so that its next use replays it from the store."""
        if self._lists.get(state.location.wal) is state:
            del self._lists[state.location.wal]
            self._since_snapshot.pop(state.location.wal, None)

    def close(self) -> None:
        """Nothing held open (the file store is closed by its owner)."""
