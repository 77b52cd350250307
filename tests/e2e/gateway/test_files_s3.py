"""The gateway's file and artifact routes with ``[files] engine = "s3"``: one stack for the
module, its store a bucket of the test session's moto server, reached through a relay the tests
cut to take the store away. The same routes on the local engine are test_api.py's."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Stack, start_stack, stop_stack
from tests.e2e.gateway.conftest import (
    CONFIG,
    SseEvent,
    parse_sse,
    seed_artifact,
    seed_offloaded_json,
)
from tests.engines.s3 import Cuttable, MotoS3

BUCKET = "gateway-files"


class S3Stack:
    """The stack, its bus, the bucket's client and the relay in front of the store."""

    def __init__(self, stack: Stack, redis_url: str, moto: MotoS3, relay: Cuttable) -> None:
        self.stack, self.redis_url, self.moto, self.relay = stack, redis_url, moto, relay

    def client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.stack.api_key}"}
        return httpx.Client(base_url=self.stack.gateway_url, headers=headers, timeout=30)

    def keys(self, prefix: str) -> list[str]:
        listed: Any = self.moto.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix)  # type: ignore[attr-defined]
        return sorted(o["Key"] for o in listed.get("Contents", []))

    def put(self, key: str, data: bytes) -> None:
        self.moto.client().put_object(Bucket=BUCKET, Key=key, Body=data)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def s3gw(tmp_path_factory: pytest.TempPathFactory, s3_server: MotoS3) -> Iterator[S3Stack]:
    s3_server.new_bucket(BUCKET)
    relay = Cuttable(s3_server.endpoint)
    home: Path = tmp_path_factory.mktemp("gateway-s3-home")
    (home / "config.toml").write_text(
        CONFIG
        + f'\n[files]\nengine = "s3"\n[files.s3]\nbucket = "{BUCKET}"\n'
        + "[storage]\njson_artifact_threshold_bytes = 1024\n"
    )
    env = {**s3_server.env(), "AWS_ENDPOINT_URL": relay.endpoint, "SOONG_MODEL_PROVIDER": "fake"}
    stack = start_stack(home, workers=1, extra_env=env)
    try:
        redis_url = json.loads((home / "run" / "stack.json").read_text())["redis_url"]
        yield S3Stack(stack, redis_url, s3_server, relay)
    finally:
        stop_stack(stack.process)
        relay.cut()


def _error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()["error"]
    if code is not None:
        assert body["code"] == code
    return body


def test_uploads_listings_and_downloads_live_in_the_bucket(s3gw: S3Stack) -> None:
    with s3gw.client() as c:
        session = c.post("/v1/sessions", json={}).json()
        sid = session["session_id"]
        prefix = f"accounts/dev/sessions/{sid}"
        up = c.put(f"/v1/sessions/{sid}/files/input/data.csv", content=b"a,b\n1,2\n")
        assert up.status_code == 201 and up.json() == {"path": "input/data.csv", "size_bytes": 8}
        form = c.post(f"/v1/sessions/{sid}/files", files=[("file", ("b.txt", b"hi", None))])
        assert form.status_code == 201, form.text
        # In the bucket, not on this host: the gateway's home holds no copy.
        assert s3gw.keys(prefix) == [f"{prefix}/input/b.txt", f"{prefix}/input/data.csv"]
        assert not (s3gw.stack.home / prefix / "input" / "data.csv").exists()
        got = c.get(f"/v1/sessions/{sid}/files/input/data.csv")
        assert got.content == b"a,b\n1,2\n" and got.headers["content-type"].startswith("text/csv")
        _error(c.put(f"/v1/sessions/{sid}/files/input/big.bin", content=b"x" * 300_000), 413)
        _error(c.put(f"/v1/sessions/{sid}/files/input/..%2Fx", content=b"x"), 400)
        _error(c.get(f"/v1/sessions/{sid}/files/output/..%2F..%2Fetc%2Fpasswd"), 400)
        _error(c.get(f"/v1/sessions/{sid}/files/output/nothing.txt"), 404)
        assert s3gw.keys(prefix) == [f"{prefix}/input/b.txt", f"{prefix}/input/data.csv"]
        # A file a worker on another host wrote to output/ (straight into the bucket here).
        s3gw.put(f"{prefix}/output/report.md", b"# hi\n")
        artifact_id = asyncio.run(
            seed_artifact(s3gw.redis_url, sid, "output/report.md", size_bytes=5)
        )
        content = c.get(f"/v1/sessions/{sid}/artifacts/{artifact_id}/content")
        assert content.content == b"# hi\n"
        assert content.headers["content-type"].startswith("text/markdown")
        listed = c.get(f"/v1/sessions/{sid}/files").json()["items"]
        assert [(f["path"], f["size_bytes"]) for f in listed] == [
            ("input/b.txt", 2),
            ("input/data.csv", 8),
            ("output/report.md", 5),
        ]
        only = c.get(f"/v1/sessions/{sid}/files", params={"area": "output", "limit": 1})
        assert [f["path"] for f in only.json()["items"]] == ["output/report.md"]
        # The writer's offloaded JSON: in the bucket by key, downloadable like any artifact.
        data = {"rows": list(range(500))}
        offloaded = asyncio.run(
            seed_offloaded_json(s3gw.redis_url, sid, session["root_agent_id"], data)
        )
        ref = c.get(f"/v1/sessions/{sid}/artifacts/{offloaded}").json()
        assert ref["path"] == f"artifacts/{sid}/{offloaded}.json"
        assert s3gw.keys(f"artifacts/{sid}/") == [ref["path"]]
        got_json = c.get(f"/v1/sessions/{sid}/artifacts/{offloaded}/content")
        assert got_json.status_code == 200, got_json.text
        assert json.loads(got_json.content) == data
        # Deleting the session removes its objects, the writer's too.
        assert c.delete(f"/v1/sessions/{sid}").status_code == 200
        assert s3gw.keys(prefix) == [] and s3gw.keys(f"artifacts/{sid}/") == []


def test_store_down_answers_503_with_retry_after_and_recovers(s3gw: S3Stack) -> None:
    with s3gw.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        assert c.put(f"/v1/sessions/{sid}/files/input/a.txt", content=b"1").status_code == 201
        s3gw.relay.cut()
        try:
            down = c.put(f"/v1/sessions/{sid}/files/input/b.txt", content=b"2")
            assert _error(down, 503, "file_store_unavailable")
            assert down.headers["retry-after"]
            _error(c.get(f"/v1/sessions/{sid}/files/input/a.txt"), 503, "file_store_unavailable")
            assert "Traceback" not in down.text
        finally:
            s3gw.relay.restore()
        # Back by itself: nothing acknowledged was lost, nothing refused was half-written.
        assert c.get(f"/v1/sessions/{sid}/files/input/a.txt").content == b"1"
        assert c.put(f"/v1/sessions/{sid}/files/input/b.txt", content=b"2").status_code == 201
        listed = c.get(f"/v1/sessions/{sid}/files").json()["items"]
        assert [f["path"] for f in listed] == ["input/a.txt", "input/b.txt"]


def _run(c: httpx.Client, sid: str, text: str) -> list[SseEvent]:
    """Post a message and read every frame of its run's stream to the end."""
    response = c.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    assert response.status_code == 202, response.text
    url = f"/v1/sessions/{sid}/runs/{response.json()['run_id']}/events"
    with c.stream("GET", url) as stream:
        events = parse_sse(stream.iter_lines())
    assert [e.event for e in events if e.event][-1] == "run_finished"
    return events


def _gone(path: Path) -> bool:
    deadline = time.monotonic() + 30
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not path.exists()


def test_a_run_works_on_a_copy_that_lands_in_the_bucket(s3gw: S3Stack) -> None:
    with s3gw.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        prefix = f"accounts/dev/sessions/{sid}"
        assert c.put(f"/v1/sessions/{sid}/files/input/a.csv", content=b"1,2\n").status_code == 201
        _run(c, sid, "files")  # the demo model writes output/demo-notes.md and reads it back
        assert s3gw.keys(prefix) == [f"{prefix}/input/a.csv", f"{prefix}/output/demo-notes.md"]
        notes = c.get(f"/v1/sessions/{sid}/files/output/demo-notes.md")
        assert notes.status_code == 200 and notes.content.startswith(b"# Demo notes")
        # The worker hydrated the upload into its copy, and removes the copy with the lane.
        assert _gone(s3gw.stack.home / prefix)


def test_a_run_waits_for_the_store_and_says_why(s3gw: S3Stack) -> None:
    with s3gw.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        prefix = f"accounts/dev/sessions/{sid}"
        s3gw.relay.cut()
        back = threading.Timer(3.0, s3gw.relay.restore)
        back.start()
        try:
            events = _run(c, sid, "files")
        finally:
            back.join()
        phases = [e.data.get("phase") for e in events if e.event == "phase" and e.data]
        assert "files" in phases
        assert s3gw.keys(prefix) == [f"{prefix}/output/demo-notes.md"]


def test_memory_and_the_account_skills_live_in_the_bucket(s3gw: S3Stack) -> None:
    home = s3gw.stack.home
    with s3gw.client() as c:
        put = c.put(
            "/v1/memory/user",
            json={"content": "- 日期用 YYYY-MM-DD\n"},
            headers={"If-Match": "*"},
        )
        assert put.status_code == 200, put.text
        keys = s3gw.keys("accounts/dev/memory/")
        assert "accounts/dev/memory/user.md" in keys and "accounts/dev/memory/changes.jsonl" in keys
        assert not (home / "accounts" / "dev" / "memory" / "user.md").exists()
        assert "YYYY-MM-DD" in c.get("/v1/memory/user").json()["content"]
        # A skill installed on another host (straight into the bucket here) is in effect here.
        s3gw.put(
            "accounts/dev/skills/report/SKILL.md",
            b"---\nname: report\ndescription: Quarterly reports.\n---\nWrite it.\n",
        )
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        listed = c.get(f"/v1/sessions/{sid}/skills").json()["items"]
        assert [(s["name"], s["description"]) for s in listed if s["source"] == "user"] == [
            ("report", "Quarterly reports.")
        ]


def test_a_worker_finds_a_skill_that_only_the_bucket_holds(s3gw: S3Stack) -> None:
    # Put after any listing: only the worker's copy at the claim can bring it to this host.
    s3gw.put(
        "accounts/dev/skills/charts/SKILL.md",
        b"---\nname: charts\ndescription: Charts.\n---\nCHARTS-BODY: bars only.\n",
    )
    with s3gw.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        _run(c, sid, "/charts draw it")
        nodes = c.get(f"/v1/sessions/{sid}/tree").json()["nodes"]
        kinds = [n["node_type"] for n in nodes]
        assert "skill_context" in kinds, kinds
