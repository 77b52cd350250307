"""What crosses hosts today: the harness's isolation, and chat runs whose turns, streams and
recovery span hosts (files, the bus's topologies and PostgreSQL add theirs as they land).

The tests run in file order on one cluster (``conftest.py``); the last one kills a host.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.multinode.cluster import Cluster
from tests.multinode.harness import Host
from tests.waiting import HangGuard

pytestmark = pytest.mark.multinode

Mn = tuple[Cluster, FakeOpenAIServer]
TERMINAL = ("completed", "failed", "cancelled", "aborted")


def _api(cl: Cluster, host: Host) -> httpx.Client:
    headers = {"Authorization": f"Bearer {cl.api_key}"}
    return httpx.Client(base_url=host.gateway_url, headers=headers, timeout=30)


def _session(api: httpx.Client) -> str:
    reply = api.post("/v1/sessions", json={})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["session_id"])


def _send(api: httpx.Client, sid: str, text: str) -> str:
    reply = api.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    assert reply.status_code == 202, reply.text
    return str(reply.json()["run_id"])


def _wait_run(api: httpx.Client, sid: str, run_id: str, cl: Cluster) -> dict[str, Any]:
    guard = HangGuard(60, f"run {run_id} to end")
    while True:
        with contextlib.suppress(httpx.HTTPError):
            reply = api.get(f"/v1/sessions/{sid}/runs/{run_id}")
            if reply.status_code == 200 and reply.json()["status"] in TERMINAL:
                return dict(reply.json())
        guard.check(cl.logs)
        time.sleep(0.05)


def _events(api: httpx.Client, sid: str, run_id: str) -> list[tuple[str, str]]:
    """The run's stream read to its end: (event id, event type) pairs."""
    pairs: list[tuple[str, str]] = []
    last_id = ""
    with api.stream("GET", f"/v1/sessions/{sid}/runs/{run_id}/events") as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if line.startswith("id: "):
                last_id = line[4:]
            elif line.startswith("event: "):
                pairs.append((last_id, line[7:]))
    return pairs


def _asked_from(model: FakeOpenAIServer, needle: str) -> list[str]:
    """The addresses the model requests whose last message is ``needle`` came from."""
    return [
        r.client
        for r in model.requests
        if r.json and str(r.json["messages"][-1].get("content", "")).startswith(needle)
    ]


@contextlib.contextmanager
def _frozen(host: Host) -> Iterator[None]:
    """The host's processes stopped (SIGSTOP) for the block: it takes no work meanwhile."""
    host.signal(signal.SIGSTOP)
    try:
        yield
    finally:
        host.signal(signal.SIGCONT)


def test_a_file_under_one_hosts_home_is_not_seen_by_any_other(mn: Mn) -> None:
    cl, _ = mn
    w1, w2 = cl.hosts["w1"], cl.hosts["w2"]
    probe = cl.home / "probe.txt"
    wrote = w1.run("sh", "-c", f"echo from-w1 > {probe}")
    assert wrote.returncode == 0, wrote.stderr
    assert w1.run("cat", str(probe)).stdout == "from-w1\n"
    # The same path on another host, and on the machine itself: nothing there.
    assert w2.run("test", "-e", str(probe)).returncode == 1
    assert cl.hosts["core"].run("test", "-e", str(probe)).returncode == 1
    assert not probe.exists()
    # Each host's home is a tmpfs of its own, and the machine's folder stays empty.
    for host in (w1, w2):
        mounts = host.run("findmnt", "-n", "-o", "FSTYPE,SOURCE", str(cl.home)).stdout.split()
        assert mounts == ["tmpfs", f"soong-{host.name}"], mounts
    assert list(cl.home.iterdir()) == []


def test_a_cut_host_reaches_nothing_until_healed(mn: Mn) -> None:
    cl, _ = mn
    w1 = cl.hosts["w1"]
    bus = f"/dev/tcp/{cl.fabric.engine_ip}/{cl.valkey.port}"
    reach = ("timeout", "2", "bash", "-c", f"exec 3<>{bus}")
    assert w1.run(*reach).returncode == 0
    cl.cut(w1)
    try:
        assert w1.run(*reach).returncode == 124  # no answer at all: timed out, not refused
        with pytest.raises(httpx.ConnectTimeout):  # nor can anything reach the host
            httpx.get(f"http://{w1.ip}:{w1.ops['run_worker.w1']}/readyz", timeout=1)
    finally:
        cl.heal(w1)
    assert w1.run(*reach).returncode == 0


def test_consecutive_turns_run_on_workers_of_different_hosts(mn: Mn) -> None:
    cl, model = mn
    w1, w2 = cl.hosts["w1"], cl.hosts["w2"]
    with _api(cl, cl.hosts["core"]) as api:
        sid = _session(api)
        with _frozen(w2):
            first = _send(api, sid, "turn one")
            assert _wait_run(api, sid, first, cl)["status"] == "completed"
        with _frozen(w1):
            second = _send(api, sid, "turn two")
            assert _wait_run(api, sid, second, cl)["status"] == "completed"
        nodes = api.get(f"/v1/sessions/{sid}/path").json()
    assert _asked_from(model, "turn one") == [w1.ip]
    assert _asked_from(model, "turn two") == [w2.ip]
    # The second host continued the conversation: it sent the model the first turn too.
    (asked,) = [r.json for r in model.requests if r.json and "turn two" in str(r.json)]
    contents = [m.get("content") for m in asked["messages"]]
    assert "turn one" in contents and "answer to turn one" in contents, contents
    texts = str(nodes)
    assert "answer to turn one" in texts and "answer to turn two" in texts


def test_a_stream_reads_the_same_through_gateways_on_other_hosts(mn: Mn) -> None:
    cl, model = mn
    core, w1, w2 = cl.hosts["core"], cl.hosts["w1"], cl.hosts["w2"]
    with _api(cl, core) as api, _api(cl, w2) as other:
        sid = _session(api)
        with _frozen(w2):  # the run executes on w1; its stream is read on core and on w2
            run_id = _send(api, sid, "slow stream")
            through_core = _events(api, sid, run_id)
        through_w2 = _events(other, sid, run_id)
    assert _asked_from(model, "slow stream") == [w1.ip]
    assert through_core == through_w2
    kinds = [kind for _, kind in through_core]
    assert kinds.count("text_delta") >= 40 and kinds[-1] == "run_finished", kinds
    assert len({event_id for event_id, _ in through_core}) == len(through_core)


def test_a_worker_host_killed_mid_run_is_taken_over_by_another(mn: Mn) -> None:
    cl, model = mn
    w1, w2 = cl.hosts["w1"], cl.hosts["w2"]
    with _api(cl, cl.hosts["core"]) as api:
        sid = _session(api)
        with _frozen(w2):
            run_id = _send(api, sid, "slow takeover")
            guard = HangGuard(60, "the run to start on w1")
            while not _asked_from(model, "slow takeover"):
                guard.check(cl.logs)
                time.sleep(0.02)
            w1.kill()
        run = _wait_run(api, sid, run_id, cl)
        events = _events(api, sid, run_id)
        nodes = str(api.get(f"/v1/sessions/{sid}/path").json())
    assert (run["status"], run["end_reason"]) == ("completed", "completed"), run
    assert _asked_from(model, "slow takeover") == [w1.ip, w2.ip]
    kinds = [kind for _, kind in events]
    assert kinds.count("run_finished") == 1 and kinds[-1] == "run_finished", kinds
    assert "piece39" in nodes
