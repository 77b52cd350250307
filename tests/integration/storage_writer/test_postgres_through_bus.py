"""The storage-writer service on PostgreSQL, through the real bus: one owner of the database, a
standby that takes over when the owner is SIGKILLed, and every acknowledged write there
afterwards exactly once (``test_through_bus.py`` runs the rest of the through-bus suite on both
backends)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

import psycopg
import pytest

from agent_core.bus import BusNames
from agent_core.bus.contracts.storage import CommandReceipt
from agent_core.config import Settings
from agent_core.errors import BusTimeoutError
from agent_core.storage_client import StorageClient
from tests.engines.postgres import postgres_cluster, postgres_dsn
from tests.integration.storage_writer.helpers import (
    spawn_writer,
    storage_client,
)
from tests.unit.storage_writer.factories import append_node, create_session
from tests.waiting import HangGuard

__all__ = ["postgres_cluster", "postgres_dsn"]


def _on_postgres(settings: Settings) -> Settings:
    storage = settings.storage.model_copy(update={"backend": "postgres"})
    return settings.model_copy(update={"storage": storage})


async def _send_until_receipt(client: StorageClient, cmd: object) -> CommandReceipt:
    while True:
        try:
            return await client.send(cmd)  # type: ignore[arg-type]
        except BusTimeoutError:
            continue


def _text(log: Path) -> str:
    return log.read_text() if log.exists() else ""


def _stop(proc: subprocess.Popen[bytes] | object) -> None:
    proc.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
    try:
        proc.wait(timeout=30)  # type: ignore[attr-defined]
    except subprocess.TimeoutExpired:
        proc.kill()  # type: ignore[attr-defined]
        proc.wait()  # type: ignore[attr-defined]


async def test_one_owner_a_refused_second_and_a_standby_that_takes_over(
    tmp_path: Path,
    redis_url: str,
    names: BusNames,
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOONG_STORAGE_BACKEND", "postgres")
    monkeypatch.setenv("SOONG_POSTGRES_DSN", postgres_dsn)
    owner = spawn_writer(tmp_path / "a", redis_url, names, tmp_path / "owner.log")
    standby = None
    try:
        async with storage_client(redis_url, names, timeout_s=1.0, attempts=1) as client:
            s = create_session()
            assert (await _send_until_receipt(client, s)).ok  # the owner is up

            second = spawn_writer(tmp_path / "b", redis_url, names, tmp_path / "second.log")
            assert second.wait(timeout=60) != 0
            out = (tmp_path / "second.log").read_text()
            assert "writer_locked" in out and "only one writer" in out

            monkeypatch.setenv("SOONG_WRITER_STANDBY", "true")
            standby_log = tmp_path / "standby.log"
            standby = spawn_writer(tmp_path / "c", redis_url, names, standby_log)
            acknowledged: list[tuple[str, CommandReceipt]] = []
            stop = asyncio.Event()

            async def producer() -> None:
                while not stop.is_set():
                    cmd = append_node(s)
                    receipt = await _send_until_receipt(client, cmd)
                    assert receipt.ok, receipt.error
                    acknowledged.append((cmd.node.node_id, receipt))

            task = asyncio.create_task(producer())
            guard = HangGuard(60, "writes before the kill, and the standby waiting")
            waiting = "partition 0 is owned"
            # The log appears when the forked process opens it: maybe after the 20 writes.
            while len(acknowledged) < 20 or waiting not in _text(standby_log):
                assert standby.poll() is None, _text(standby_log)
                guard.check()
                await asyncio.sleep(0.02)
            owner.send_signal(signal.SIGKILL)
            owner.wait()
            before = len(acknowledged)
            guard = HangGuard(60, "the standby to take over")
            while len(acknowledged) < before + 20:
                assert standby.poll() is None, (tmp_path / "standby.log").read_text()
                guard.check()
                await asyncio.sleep(0.02)
            stop.set()
            async with asyncio.timeout(60):
                await task
    finally:
        for proc in (owner, standby):
            if proc is not None and proc.poll() is None:
                _stop(proc)
    assert "took over partition 0" in (tmp_path / "standby.log").read_text()
    assert len(acknowledged) >= 40
    with psycopg.connect(postgres_dsn) as conn:
        stored = dict(
            conn.execute(
                "SELECT node_id, node_seq FROM nodes WHERE session_id = %s", (s.session_id,)
            ).fetchall()
        )
    # Every acknowledged write is stored once, with the sequence number its receipt reported.
    assert len(stored) == len({node_id for node_id, _ in acknowledged})
    for node_id, receipt in acknowledged:
        assert stored[node_id] == receipt.result["node_seq"]
    assert sorted(stored.values()) == list(range(1, len(stored) + 1))
