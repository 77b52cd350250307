"""SIGKILL of the writer subprocess during a write storm; a second writer refuses to start."""

from __future__ import annotations

import asyncio
import random
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.bus import BusNames
from agent_core.bus.contracts.storage import AppendNode, CommandReceipt
from agent_core.errors import BusTimeoutError
from agent_core.storage_client import StorageClient
from services.storage_writer.schema import events_table, nodes_table
from tests.integration.storage_writer.helpers import (
    integrity_ok,
    layout_of,
    spawn_writer,
    storage_client,
)
from tests.unit.storage_writer.factories import append_node, create_session
from tests.waiting import HangGuard

KILLS = 20
PRODUCERS = 8


@dataclass
class Ledger:
    """What the producers were told: one receipt per command, and how often they had to retry."""

    receipts: list[tuple[AppendNode, CommandReceipt]] = field(default_factory=list)
    retries: int = 0
    duplicates: int = 0


async def _send_until_receipt(client: StorageClient, cmd: object, ledger: Ledger) -> CommandReceipt:
    first = True
    while True:
        try:
            receipt = await client.send(cmd)  # type: ignore[arg-type]
        except BusTimeoutError:
            ledger.retries += 1
            first = False
            continue
        if receipt.duplicate and not first:
            ledger.duplicates += 1
        return receipt


def _db_rows(home: Path, session_id: str) -> tuple[dict[str, int], dict[str, int]]:
    layout = layout_of(home)
    conn = sqlite3.connect(layout.path(layout.shard_of(session_id)))
    try:
        nodes = dict(conn.execute(f"SELECT node_id, node_seq FROM {nodes_table(session_id)}"))
        events = dict(
            conn.execute(
                f"SELECT node_id, seq FROM {events_table(session_id)} WHERE node_id IS NOT NULL"
            )
        )
        n_nodes = conn.execute(f"SELECT count(*) FROM {nodes_table(session_id)}").fetchone()[0]
        assert n_nodes == len(nodes)
    finally:
        conn.close()
    return nodes, events


async def test_sigkill_during_write_storm(tmp_path: Path, redis_url: str, names: BusNames) -> None:
    rng = random.Random(20261129)
    log = tmp_path / "writer.log"
    proc = spawn_writer(tmp_path, redis_url, names, log)
    ledger = Ledger()
    stop = asyncio.Event()
    progress = 0

    async def producer(client: StorageClient) -> None:
        nonlocal progress
        s = create_session()
        assert (await _send_until_receipt(client, s, ledger)).ok
        while not stop.is_set():
            cmd = append_node(s)
            receipt = await _send_until_receipt(client, cmd, ledger)
            assert receipt.ok, receipt.error
            ledger.receipts.append((cmd, receipt))
            progress += 1

    async with storage_client(redis_url, names, timeout_s=0.75, attempts=1) as client:
        tasks = [asyncio.create_task(producer(client)) for _ in range(PRODUCERS)]
        started = time.monotonic()
        try:
            for kill in range(KILLS):
                seen = progress
                while progress < seen + PRODUCERS:  # the new writer is taking writes again
                    assert proc.poll() is None, log.read_text()
                    await asyncio.sleep(0.02)
                await asyncio.sleep(rng.uniform(0.0, 0.25))
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                if kill % 4 == 0:
                    # A writer back at once leaves no client waiting long enough to retry: every
                    # fourth stays down until one has given up and sent its command again (whose
                    # second copy then meets the first: a duplicate receipt).
                    retried, guard = ledger.retries, HangGuard(60, "a client to retry")
                    while ledger.retries == retried:
                        guard.check()
                        await asyncio.sleep(0.02)
                proc = spawn_writer(tmp_path, redis_url, names, log)
            await asyncio.sleep(0.5)
        finally:
            stop.set()
            async with asyncio.timeout(60):
                await asyncio.gather(*tasks)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    elapsed = time.monotonic() - started

    assert integrity_ok(tmp_path)
    by_session: dict[str, list[tuple[AppendNode, CommandReceipt]]] = {}
    for cmd, receipt in ledger.receipts:
        by_session.setdefault(cmd.session_id, []).append((cmd, receipt))
    assert len(by_session) == PRODUCERS
    for session_id, pairs in by_session.items():
        nodes, events = _db_rows(tmp_path, session_id)
        # Every receipted command is present exactly once, with the seqs its receipt reported.
        assert len(nodes) == len(pairs)
        for cmd, receipt in pairs:
            assert nodes[cmd.node.node_id] == receipt.result["node_seq"]
            assert events[cmd.node.node_id] == receipt.result["seq"]
        assert sorted(nodes.values()) == list(range(1, len(nodes) + 1))
    assert ledger.retries > 0 and ledger.duplicates > 0, (ledger.retries, ledger.duplicates)
    print(
        f"{KILLS} kills, {len(ledger.receipts)} receipts, {ledger.retries} retries, "
        f"{ledger.duplicates} duplicate receipts after retry, {elapsed:.1f}s"
    )


async def test_second_writer_refuses_to_start(
    tmp_path: Path, redis_url: str, names: BusNames
) -> None:
    first = spawn_writer(tmp_path, redis_url, names, tmp_path / "first.log")
    try:
        async with storage_client(redis_url, names) as client:
            assert (await client.send(create_session())).ok  # the first writer is up
        second = spawn_writer(tmp_path, redis_url, names, tmp_path / "second.log")
        code = second.wait(timeout=30)
        out = (tmp_path / "second.log").read_text()
        assert code != 0
        assert "writer_locked" in out and "only one writer" in out
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        try:
            first.wait(timeout=30)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait()
