"""Files that follow a session to any host (``[files] engine = "s3"``): one cluster for the
module — a core host (storage-writer, task-WAL, memory, gateway A), worker hosts ``w1`` and
``w2`` (``w2`` also runs gateway C) — and one moto server on the fabric's engine address, which
every host reaches and none shares a disk with."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.engines.s3 import MotoS3, start_moto
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import Delay, Finish, ScriptedTurn, StopKind, Text, Usage, tool_call
from tests.multinode.cluster import Cluster, cluster
from tests.multinode.conftest import HOSTS
from tests.multinode.harness import Host
from tests.waiting import HangGuard

pytestmark = pytest.mark.multinode

BUCKET = "mn-files"
Mn = tuple[Cluster, FakeOpenAIServer, MotoS3]


def _answer(request: Any) -> ScriptedTurn:
    """``write NAME TEXT``: write_file output/NAME, then "done"; ``writeslow NAME TEXT``: the
    same, then forty pieces over about four seconds (long enough to kill a host mid-run);
    ``read PATH``: read_file PATH, then "done"."""
    last = request["messages"][-1]
    text = str(last.get("content", ""))
    steps: list[Any]
    reason: StopKind = "tool_use"
    if last.get("role") == "tool":
        reason = "end_turn"
        steps = [Text(text="done")]
        if str(last.get("tool_call_id", "")).startswith("call_ws_"):
            steps = [step for i in range(40) for step in (Delay(seconds=0.1), Text(text=f"p{i} "))]
    elif text.startswith(("write ", "writeslow ")):
        verb, name, body = text.split(" ", 2)
        args = json.dumps({"path": f"output/{name}", "content": body})
        call_id = f"call_{'ws' if verb == 'writeslow' else 'w'}_{name}"
        steps = tool_call(0, call_id, "write_file", [args])
    elif text.startswith("read "):
        args = json.dumps({"path": text.split(" ", 1)[1]})
        steps = tool_call(0, f"call_r_{time.monotonic_ns()}", "read_file", [args])
    else:
        reason = "end_turn"
        steps = [Text(text=f"answer to {text}")]
    return ScriptedTurn(
        steps=[*steps, Usage(input_tokens=5, output_tokens=5), Finish(reason=reason)]
    )


@pytest.fixture(scope="module")
def mn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mn]:
    import os

    if os.geteuid() != 0:
        pytest.fail("the multi-host tests need root (make test-multinode)")
    base = tmp_path_factory.mktemp("mn-files")
    config = f'[files]\nengine = "s3"\n[files.s3]\nbucket = "{BUCKET}"\n'
    with cluster(base, config=config) as running:
        moto = start_moto(base / "moto.log", host=running.fabric.engine_ip)
        try:
            moto.new_bucket(BUCKET)
            running.env.update(moto.env())
            with running.serving(FakeOpenAIServer(default=_answer)) as model:
                running.start_hosts(HOSTS)
                yield running, model, moto
        finally:
            moto.stop()


def _api(cl: Cluster, host: Host) -> httpx.Client:
    headers = {"Authorization": f"Bearer {cl.api_key}"}
    return httpx.Client(base_url=host.gateway_url, headers=headers, timeout=30)


@contextlib.contextmanager
def _frozen(host: Host) -> Iterator[None]:
    """The host's processes stopped (SIGSTOP) for the block: it takes no work meanwhile."""
    host.signal(signal.SIGSTOP)
    try:
        yield
    finally:
        host.signal(signal.SIGCONT)


def _turn(api: httpx.Client, sid: str, text: str, cl: Cluster) -> None:
    reply = api.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    assert reply.status_code == 202, reply.text
    run_id = reply.json()["run_id"]
    guard = HangGuard(90, f"run {run_id} to end")
    while True:
        with contextlib.suppress(httpx.HTTPError):
            got = api.get(f"/v1/sessions/{sid}/runs/{run_id}")
            if got.status_code == 200 and got.json()["status"] in (
                "completed", "failed", "cancelled", "aborted",
            ):  # fmt: skip
                assert got.json()["status"] == "completed", got.json()
                return
        guard.check(cl.logs)
        time.sleep(0.05)


def _tool_results(model: FakeOpenAIServer, call_prefix: str) -> list[tuple[str, str]]:
    """(the asking host's address, the tool result's text) of each model request that carried
    the result of a call whose id starts with ``call_prefix``."""
    found = []
    for r in model.requests:
        if not r.json:
            continue
        last = r.json["messages"][-1]
        if last.get("role") == "tool" and str(last.get("tool_call_id", "")).startswith(call_prefix):
            found.append((r.client, str(last.get("content"))))
    return found


def test_upload_on_a_read_on_b_download_on_c(mn: Mn) -> None:
    cl, model, _ = mn
    core, w1, w2 = cl.hosts["core"], cl.hosts["w1"], cl.hosts["w2"]
    with _api(cl, core) as a, _api(cl, w2) as c:
        sid = a.post("/v1/sessions", json={}).json()["session_id"]
        up = a.put(f"/v1/sessions/{sid}/files/input/data.csv", content=b"alpha,beta\n")
        assert up.status_code == 201, up.text
        before = len(model.requests)
        with _frozen(w2):  # the worker on w1 (host B) takes the turns
            _turn(a, sid, "read input/data.csv", cl)
            _turn(a, sid, "write out.txt hello-from-w1", cl)
        read = [(ip, text) for ip, text in _tool_results(model, "call_r_")]
        assert any(ip == w1.ip and "alpha,beta" in text for ip, text in read), read
        assert all(r.client == w1.ip for r in model.requests[before:])
        # Written on B, downloaded through the gateway of host C.
        got = c.get(f"/v1/sessions/{sid}/files/output/out.txt")
        assert got.status_code == 200 and got.content == b"hello-from-w1"


def test_alternating_worker_hosts_see_every_earlier_turns_files(mn: Mn) -> None:
    cl, model, _ = mn
    w1, w2 = cl.hosts["w1"], cl.hosts["w2"]
    with _api(cl, cl.hosts["core"]) as api:
        sid = api.post("/v1/sessions", json={}).json()["session_id"]
        with _frozen(w2):
            _turn(api, sid, "write t1.txt one-on-w1", cl)
        with _frozen(w1):
            _turn(api, sid, "read output/t1.txt", cl)
            _turn(api, sid, "write t2.txt two-on-w2", cl)
        with _frozen(w2):
            _turn(api, sid, "read output/t2.txt", cl)
        files = api.get(f"/v1/sessions/{sid}/files").json()["items"]
    reads = _tool_results(model, "call_r_")
    assert any(ip == w2.ip and "one-on-w1" in text for ip, text in reads), reads
    assert any(ip == w1.ip and "two-on-w2" in text for ip, text in reads), reads
    assert [f["path"] for f in files] == ["output/t1.txt", "output/t2.txt"]


def test_a_worker_host_killed_mid_run_loses_no_acknowledged_file(mn: Mn) -> None:
    """Last in the module: it kills ``w1``."""
    cl, model, _ = mn
    w1, w2 = cl.hosts["w1"], cl.hosts["w2"]
    with _api(cl, cl.hosts["core"]) as api, _api(cl, w2) as c:
        sid = api.post("/v1/sessions", json={}).json()["session_id"]
        with _frozen(w2):
            reply = api.post(
                f"/v1/sessions/{sid}/messages",
                json={"text": "writeslow kept.txt synced-before-kill"},
            )
            assert reply.status_code == 202, reply.text
            run_id = reply.json()["run_id"]
            # The model got the write's result from w1: the file was synced before that.
            guard = HangGuard(60, "the write's result to reach the model from w1")
            while not _tool_results(model, "call_ws_kept"):
                guard.check(cl.logs)
                time.sleep(0.02)
            w1.kill()
        guard = HangGuard(90, f"run {run_id} to end on w2")
        while True:
            with contextlib.suppress(httpx.HTTPError):
                got = api.get(f"/v1/sessions/{sid}/runs/{run_id}").json()
                if got.get("status") in ("completed", "failed", "cancelled", "aborted"):
                    break
            guard.check(cl.logs)
            time.sleep(0.05)
        assert got["status"] == "completed", got
        # The next turn runs on w2 (w1 is gone) and finds the file the killed host wrote.
        _turn(api, sid, "read output/kept.txt", cl)
        got_file = c.get(f"/v1/sessions/{sid}/files/output/kept.txt")
    assert got_file.status_code == 200 and got_file.content == b"synced-before-kill"
    assert [ip for ip, _ in _tool_results(model, "call_ws_kept")][0] == w1.ip
    reads = _tool_results(model, "call_r_")
    assert any(ip == w2.ip and "synced-before-kill" in text for ip, text in reads), reads
