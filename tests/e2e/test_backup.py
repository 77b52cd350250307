"""``soong-agent backup`` under load (sessions × turns each and on until the backup is taken:
8 × 4 in ``make test``; ``SOONG_BACKUP_LOAD=50x10`` for the issue's full 50 × 10), ``restore``
into a new home: the new home answers for every session as the old one did at
the backup.

What "at the backup" was is read from the backup's own database copy (sqlite3, read-only: the
test's view, not the product's). Then, on the restored stack: every session of the backup is
there; every node the backup holds is there and equal, field for field, to the original stack's
node of that id; every run that had ended at the backup answers exactly as on the original; every
run that was in flight ends exactly once (the restored workers take it over, as after a crash);
the original API key and an uploaded file came along.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REPO, Stack, start_stack, stop_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

SESSIONS, TURNS = (int(n) for n in os.environ.get("SOONG_BACKUP_LOAD", "8x4").split("x"))
BACKUP_AFTER = SESSIONS * TURNS // 2  # turns finished when the backup starts: mid-load
TERMINAL = {"completed", "failed", "cancelled", "aborted"}


def _client(stack: Stack) -> httpx.Client:
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    return httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=60)


def _turns(
    stack: Stack, sid: str, done: list[int], lock: threading.Lock, backed_up: threading.Event
) -> int:
    """At least TURNS turns, and on until the backup is taken: the load never ends before it."""
    i = 0
    with _client(stack) as c:
        while i < TURNS or not backed_up.is_set():
            posted = c.post(f"/v1/sessions/{sid}/messages", json={"text": f"turn {i}"})
            assert posted.status_code == 202, posted.text
            run = posted.json()
            with c.stream("GET", f"/v1/sessions/{sid}/runs/{run['run_id']}/events") as events:
                for _ in events.iter_lines():
                    pass
            with lock:
                done[0] += 1
            i += 1
    return i


def _cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SOONG_AGENT_HOME": str(home)}
    env.pop("SOONG_REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "agent_core.cli", *argv],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _backed_up(backup: Path) -> dict[str, dict[str, Any]]:
    """Per session in the backup's database: its node ids and its runs' statuses."""
    found: dict[str, dict[str, Any]] = {}
    for shard in sorted((backup / "database" / "shards").glob("*.sqlite")):
        conn = sqlite3.connect(f"file:{shard}?mode=ro", uri=True)
        try:
            for (sid,) in conn.execute("SELECT session_id FROM sessions"):
                nodes = [r[0] for r in conn.execute(f'SELECT node_id FROM "nodes_{sid}"')]
                runs = dict(
                    conn.execute("SELECT run_id, status FROM runs WHERE session_id = ?", (sid,))
                )
                found[sid] = {"nodes": nodes, "runs": runs}
        finally:
            conn.close()
    return found


def test_a_backup_under_load_restores_into_a_new_home_that_answers_the_same(
    tmp_path: Path,
) -> None:
    fake = {"SOONG_MODEL_PROVIDER": "fake"}
    for home in (tmp_path / "old", tmp_path / "new"):  # many clients on one key: no rate limit
        home.mkdir()
        (home / "config.toml").write_text(
            "[gateway]\nrate_limit_per_s = 5000.0\nrate_limit_burst = 5000\n"
            "max_sse_streams_per_key = 64\n"
        )
    old = start_stack(tmp_path / "old", workers=2, extra_env=fake)
    backup = tmp_path / "backup"
    try:
        with _client(old) as c:
            sids = [c.post("/v1/sessions", json={}).json()["session_id"] for _ in range(SESSIONS)]
            up = c.post(f"/v1/sessions/{sids[0]}/files", files=[("file", ("a.csv", b"x,y\n"))])
            assert up.status_code == 201, up.text
        done, lock, backed_up = [0], threading.Lock(), threading.Event()
        with ThreadPoolExecutor(SESSIONS) as pool:
            load = [pool.submit(_turns, old, sid, done, lock, backed_up) for sid in sids]
            while done[0] < BACKUP_AFTER:
                for future in load:
                    if future.done():
                        future.result()  # a turn that failed says why
                time.sleep(0.05)
            try:
                taken = _cli(old.home, "backup", str(backup))
            finally:
                backed_up.set()
            assert taken.returncode == 0, taken.stderr
            turns = [future.result() for future in load]
        assert min(turns) >= TURNS and done[0] == sum(turns)
        original = _answers(old, sids)
    finally:
        stop_stack(old.process)
    at_backup = _backed_up(backup)
    assert sorted(at_backup) == sorted(sids)
    in_flight = {r for s in at_backup.values() for r, st in s["runs"].items() if st not in TERMINAL}
    assert in_flight, "the backup was meant to be taken mid-load: some runs in flight"

    restored = _cli(tmp_path / "new", "restore", str(backup))
    assert restored.returncode == 0, restored.stderr
    new = start_stack(tmp_path / "new", workers=2, extra_env=fake, new_key=False)
    new.api_key = old.api_key  # the key came along with the bus
    try:
        with _client(new) as c:
            assert c.get(f"/v1/sessions/{sids[0]}/files/input/a.csv").content == b"x,y\n"
            for sid, then in at_backup.items():
                _wait_until_no_run_in_flight(c, sid)
                nodes = {n["node_id"]: n for n in _all_nodes(c, sid)}
                for node_id in then["nodes"]:
                    assert nodes[node_id] == original[sid]["nodes"][node_id], (sid, node_id)
                runs = {r["run_id"]: r for r in c.get(f"/v1/sessions/{sid}/runs").json()["items"]}
                assert set(runs) == set(then["runs"]), sid
                for run_id, run in runs.items():
                    assert run["status"] in TERMINAL, run  # every run ends, exactly once
                    if run_id not in in_flight:
                        assert run == original[sid]["runs"][run_id]
    finally:
        stop_stack(new.process)


def _all_nodes(c: httpx.Client, sid: str) -> list[dict[str, Any]]:
    tree = c.get(f"/v1/sessions/{sid}/tree").json()
    return [c.get(f"/v1/sessions/{sid}/nodes/{n['node_id']}").json() for n in tree["nodes"]]


def _answers(stack: Stack, sids: list[str]) -> dict[str, dict[str, Any]]:
    with _client(stack) as c:
        return {
            sid: {
                "nodes": {n["node_id"]: n for n in _all_nodes(c, sid)},
                "runs": {r["run_id"]: r for r in c.get(f"/v1/sessions/{sid}/runs").json()["items"]},
            }
            for sid in sids
        }


def _wait_until_no_run_in_flight(c: httpx.Client, sid: str) -> None:
    for _ in range(600):  # a hang guard: the restored workers end in-flight runs within seconds
        runs = c.get(f"/v1/sessions/{sid}/runs").json()["items"]
        if all(r["status"] in TERMINAL for r in runs):
            return
        time.sleep(0.1)
    stuck = [(r["run_id"], r["status"], r["attempt"]) for r in runs if r["status"] not in TERMINAL]
    raise AssertionError(f"runs of {sid} still in flight: {stuck}")
