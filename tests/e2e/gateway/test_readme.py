"""The README's examples run as written against a stack: the curl session (only the two values
`make run` prints are filled in) and the ten-line SDK program."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from soong_agent._sse import SseDecoder
from tests.conftest import REPO
from tests.e2e.gateway.conftest import Gw, new_session, run_message

pytestmark = pytest.mark.e2e


def _block(lang: str) -> str:
    blocks = re.findall(rf"^```{lang}\n(.*?)^```", (REPO / "README.md").read_text(), re.S | re.M)
    assert len(blocks) == 1, f"expected one ```{lang} block in the README"
    return str(blocks[0])


def _fill(script: str, name: str, value: str) -> str:
    filled, count = re.subn(rf"^export {name}=\S+", f"export {name}={value}", script, flags=re.M)
    assert count == 1, name
    return filled


def _ids(sse: str) -> list[str]:
    return [f.id for f in SseDecoder().feed(sse.encode()) if f.id is not None]


def test_the_curl_examples_run_as_written(gw: Gw) -> None:
    script = _fill(_block("sh"), "SOONG_GATEWAY_URL", gw.stack.gateway_url)
    script = _fill(script, "SOONG_API_KEY", gw.stack.api_key)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    start = done.stdout.index('{"session_id"')  # the tree's JSON, between the two streams
    end = done.stdout.index("retry:", start)
    streamed, tree, resumed = done.stdout[:start], done.stdout[start:end], done.stdout[end:]
    assert json.loads(tree)["nodes"] and json.loads(tree)["active_node_id"]
    assert streamed.count("event: run_finished") == 1 and resumed.count("event: run_finished") == 1
    ids = _ids(streamed)
    assert len(ids) > 3 and _ids(resumed) == ids[3:]  # exactly the events after the third


def test_the_file_examples_run_as_written(gw: Gw, tmp_path: Path) -> None:
    """Upload, list and download as the README shows them, after its session was made."""
    session = _block("sh").split("\ncurl -sfN", 1)[0]  # the exports and the session
    script = _fill(session, "SOONG_GATEWAY_URL", gw.stack.gateway_url)
    script = _fill(script, "SOONG_API_KEY", gw.stack.api_key) + "\n" + _block("bash")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # the example writes data.csv where it runs
    )
    assert done.returncode == 0, done.stderr
    uploaded, listed, downloaded = done.stdout.split("\n", 2)
    assert json.loads(uploaded) == {"items": [{"path": "input/data.csv", "size_bytes": 19}]}
    assert [f["path"] for f in json.loads(listed)["items"]] == ["input/data.csv"]
    assert downloaded == "city,sales\nOslo,12\n"


def test_the_sdk_example_runs_as_written(gw: Gw) -> None:
    env = {
        **os.environ,
        "SOONG_GATEWAY_URL": gw.stack.gateway_url,
        "SOONG_API_KEY": gw.stack.api_key,
    }
    done = subprocess.run(
        [sys.executable, "-c", _block("python")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    assert "[fake model]" in done.stdout
    assert "[completed] tools: ['lookup']" in done.stdout


def _data_table() -> dict[str, str]:
    """The README's "Where data lives" table: path → what it says is there."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Where data lives", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([^`]+)` \| (.+) \|$", section, re.M))


def test_the_data_table_names_everything_a_home_holds(gw: Gw) -> None:
    """An operator who backs up what the table lists saves everything: every entry of a serving
    home is in it, and the session's data is where the table says (the shards, not the
    catalog file)."""
    table = _data_table()
    listed = {path.split("/")[0] for path in table}
    with gw.client() as client:
        session_id = new_session(client)
        run_message(client, session_id)
    home = gw.stack.home
    companions = ("-wal", "-shm", ".lock")  # SQLite's and the writer's files beside a database
    unlisted = [
        p.name
        for p in home.iterdir()
        # the operator's own file, and what this harness saves of `up`'s output
        if p.name not in ("config.toml", "up.log")
        and p.name not in listed
        and not any(p.name.removesuffix(c) in listed for c in companions)
    ]
    assert not unlisted, f"in the home but not in the README's table: {unlisted}"
    assert "catalog" in table["sessions.sqlite"]
    assert "the data" in table["sessions.sqlite.shards/NN.sqlite"]
    needle = session_id.encode()
    catalog = [p for p in home.glob("sessions.sqlite*") if p.is_file()]
    shards = list((home / "sessions.sqlite.shards").iterdir())
    assert any(needle in p.read_bytes() for p in shards if p.is_file())
    # The catalog holds the account-level search index and audit log, never a session's tables.
    assert catalog
    conn = sqlite3.connect(home / "sessions.sqlite")
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
    finally:
        conn.close()
    assert "search" in table["sessions.sqlite"] and "search" in tables
    assert not any(session_id in name for name in tables)
    # The API keys live in the bus's data: an operator who backs up only the database loses them.
    assert "API keys" in table["redis/"]
