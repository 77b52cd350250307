"""The search index's own process: the outbox flushes, off the writer's thread.

A flush (``search_outbox.flush_outbox``) reads each queued row's text back from its shard and
indexes it in FTS5, ~50 µs a row. On the writer's one thread every batch queued behind a flush
waited for it (and, every so often, for one of FTS5's merges), so the receipts' tail grew with
the index. The SQLite storage-writer service runs its flushes in one child process instead:

* the writer's thread only plans a flush (which shards, after which seq:
  ``Writer.plan_flush``) and records what it did (``Writer.record_flush``: each shard's next
  transaction deletes the rows indexed), so the outboxes still have one writer;
* the child reads the outboxes and nodes on read-only connections of its own and writes the
  catalog's index, the same ``flush_outbox`` the writer runs in-process (tests, close), on the
  other core when there is one.

The catalog then has two writers: the child's flushes and the writer's session deletions (which
take a session's words out before the shard commits). SQLite's lock on the file orders their
transactions, and a flush skips the texts of a session whose deletion the catalog has recorded
(``apply_ops(flush=True)``): a flush that read a session just before its deletion cannot put back
what the deletion took out. A child that dies (killed, out of memory) fails the flush it was
running; that flush's rows stay pending and the next flush starts a new child.

The child is ``python -m services.storage_writer.index_child <catalog> <shards> <log level>
<log format> <debug> <instance>`` (a plain subprocess: the service may itself be a daemonic
``multiprocessing`` child, which may not have children of its own), one JSON line each way per
flush on its standard input and output; its log lines go to the service's standard error, in the
service's format, as service ``search_index``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from dataclasses import dataclass
from typing import Literal

from services.storage_writer.shards import ShardLayout

__all__ = ["IndexProcess", "IndexProcessError", "LogSetup"]

log = logging.getLogger("soong.storage_writer")

# A reply holds a seq per shard flushed: far below this.
_LINE_LIMIT = 1 << 20
_CLOSE_S = 10.0
# A flush's reply: a flush before a search moves every pending row (~40 µs each), so this allows
# a backlog of about a million; a child silent for longer is taken for stuck and killed (its
# rows stay pending), rather than holding every later search behind it.
_REPLY_S = 60.0


@dataclass(frozen=True)
class LogSetup:
    """How the child logs: as the service that starts it does."""

    level: str = "INFO"
    format: Literal["text", "json"] = "text"
    debug: bool = False
    instance: str = "0"

    def argv(self) -> list[str]:
        return [self.level, self.format, "1" if self.debug else "0", self.instance]


class IndexProcessError(RuntimeError):
    """A flush the index process failed or did not answer (its rows stay pending). Logged by
    the flusher, never sent: no command or query waits on it."""


class IndexProcess:
    """The child process, as the service sees it. Used on the event loop, one flush at a time
    (``index_flush.IndexFlusher`` holds its lock around each)."""

    def __init__(self, layout: ShardLayout, log_setup: LogSetup | None = None) -> None:
        self._layout = layout
        self._log = log_setup or LogSetup()
        self._proc: asyncio.subprocess.Process | None = None
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The running child's process id."""
        return None if self._proc is None else self._proc.pid

    async def start(self) -> None:
        """Start the child (it is started again by the next flush once it has died)."""
        if self._proc is None or self._proc.returncode is not None:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "services.storage_writer.index_child",
                str(self._layout.db_path),
                str(self._layout.shard_count),
                *self._log.argv(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=_LINE_LIMIT,
            )

    async def flush(self, after: dict[int, int]) -> tuple[dict[int, int], int]:
        """Run ``flush_outbox`` over the shards of ``after`` (shard -> read after this seq) in
        the child; return shard -> the last seq indexed, and the rows moved. Raises
        :class:`IndexProcessError` if the child failed, died or did not answer within
        ``_REPLY_S``, or once :meth:`close` was called (the rows stay pending)."""
        if self._closed:
            raise IndexProcessError("the search index process is closed")
        await self.start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        request = {"after": {str(k): v for k, v in after.items()}}
        try:
            proc.stdin.write(json.dumps(request, separators=(",", ":")).encode() + b"\n")
            await proc.stdin.drain()
            async with asyncio.timeout(_REPLY_S):
                line = await proc.stdout.readline()
        except TimeoutError:
            self._kill()
            raise IndexProcessError(
                f"the search index process did not answer in {_REPLY_S:g} s; killed"
            ) from None
        except BaseException:
            # Cancelled or broken between a request and its reply: the pipe's state is unknown.
            self._kill()
            raise
        if not line:
            code = await proc.wait()
            self._proc = None
            raise IndexProcessError(f"the search index process exited ({code})")
        reply = json.loads(line)
        if "error" in reply:
            raise IndexProcessError(f"the search index flush failed: {reply['error']}")
        return {int(k): int(v) for k, v in reply["last"].items()}, int(reply["moved"])

    async def close(self) -> None:
        """Stop the child: its input closed, it ends after the flush it may be running. No
        flush starts another one afterwards."""
        self._closed = True
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            async with asyncio.timeout(_CLOSE_S):
                await proc.wait()
        except TimeoutError:
            log.warning("the search index process did not stop; killed")
            proc.kill()
            await proc.wait()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
