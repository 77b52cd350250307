"""Faults end cleanly: SIGKILLs of the storage-writer, the gateway and the bus, and a full disk,
on a whole ``soong-agent up`` whose database lives on a small tmpfs of its own.

Each test waits on conditions, never on fixed sleeps, and asserts what happened, not how fast:
the figures are printed (``-s``), and ``bench/faults.py`` collects them and holds them to their
promises (serving again within 5 s of a writer restart, a full disk reported within 15 s).
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.conftest import Stack, start_stack, stop_stack
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import Delay, Finish, ScriptedTurn, Text, Usage
from tests.waiting import HangGuard

pytestmark = pytest.mark.e2e

DISK_MB = 48
TERMINAL = ("completed", "failed", "cancelled", "aborted")


# A message that asks for an answer larger than any room a shard's write-ahead log can offer once
# the disk is full (a checkpointed WAL is written again from its start without growing: a small
# answer could still fit there, and then the run would never meet the full disk).
BIG = "big"
BIG_ANSWER_BYTES = 4 << 20


def _slow_answer(request: Any) -> ScriptedTurn:
    """Twenty pieces over about two seconds: long enough to kill something mid-run."""
    steps: list[Any] = []
    for i in range(20):
        steps += [Delay(seconds=0.1), Text(text=f"piece{i} ")]
    if request["messages"][-1].get("content") == BIG:
        steps.append(Text(text="x" * BIG_ANSWER_BYTES))
    return ScriptedTurn(steps=[*steps, Usage(input_tokens=5, output_tokens=20), Finish()])


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real, small filesystem of its own for the database (a tmpfs: the tests run as root)."""
    mount = tmp_path_factory.mktemp("db-disk")
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0700", "tmpfs", str(mount)],
        check=True,
    )
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture(scope="module")
def fstack(tmp_path_factory: pytest.TempPathFactory, disk: Path) -> Iterator[Stack]:
    """One stack for this module's faults: one run-worker, a slow scripted OpenAI-style model."""
    fake = FakeOpenAIServer(default=_slow_answer)
    fake.start_in_thread()
    env = {
        "SOONG_DB_PATH": str(disk / "sessions.sqlite"),
        "SOONG_MODEL_PROVIDER": "openai",
        "SOONG_MODEL_NAME": "fake-model",
        "SOONG_MODEL_BASE_URL": fake.sdk_base_url,
        "OPENAI_API_KEY": "sk-test-not-a-real-key-000000",
    }
    home = tmp_path_factory.mktemp("faults-home")
    # Short storage timeouts, so that an outage outlasts a request's whole retry budget quickly.
    (home / "config.toml").write_text(
        "[bus]\nrequest_timeout_s = 0.5\n[gateway]\nmax_sse_streams_per_key = 2\n"
    )
    stack = start_stack(home, workers=1, extra_env=env)
    try:
        yield stack
    finally:
        stop_stack(stack.process)
        fake.stop_thread()


def _api(stack: Stack, timeout_s: float = 30) -> httpx.Client:
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    return httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=timeout_s)


def _child(stack: Stack, needle: str) -> psutil.Process:
    for proc in psutil.Process(stack.process.pid).children(recursive=True):
        try:
            if needle in " ".join(proc.cmdline()):
                return proc
        except psutil.NoSuchProcess:
            continue
    raise AssertionError(f"no child process {needle!r}:\n{stack.log()[-3000:]}")


def _children_serving(stack: Stack) -> list[psutil.Process]:
    """The stack's service processes (gateway, writers, workers, …), not the bus."""
    found = []
    for proc in psutil.Process(stack.process.pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if "agent_core.cli serve" in " ".join(proc.cmdline()):
                found.append(proc)
    assert len(found) >= 5, stack.log()[-3000:]
    return found


def _writer(disk: Path) -> psutil.Process:
    """The storage-writer that owns the database (the other one is its standby)."""
    return psutil.Process(int((disk / "sessions.sqlite.lock").read_text()))


def _kill(stack: Stack, needle: str) -> tuple[int, float]:
    """SIGKILL the child whose command line holds ``needle``; its pid and the time of the kill."""
    return _kill_process(_child(stack, needle))


def _kill_process(victim: psutil.Process) -> tuple[int, float]:
    victim.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    victim.wait(timeout=10)
    return victim.pid, killed


def _send(api: httpx.Client, text: str = "go") -> tuple[str, str]:
    session = api.post("/v1/sessions", json={})
    assert session.status_code == 201, session.text
    sid = session.json()["session_id"]
    posted = api.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    assert posted.status_code == 202, posted.text
    return sid, posted.json()["run_id"]


def _run(api: httpx.Client, sid: str, run_id: str) -> dict[str, Any] | None:
    """The run's state; ``None`` while the stack answers 503 (recovering from a fault)."""
    reply = api.get(f"/v1/sessions/{sid}/runs/{run_id}")
    if reply.status_code == 503:
        return None
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _wait_run(
    api: httpx.Client, sid: str, run_id: str, statuses: tuple[str, ...]
) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while (run := _run(api, sid, run_id)) is None or run["status"] not in statuses:
        assert time.monotonic() < deadline, run
        time.sleep(0.05)
    return run


def _serving_again(stack: Stack, since: float, limit_s: float = 60) -> float:
    """Seconds from ``since`` until a new session is created (a write through the writer)."""
    with _api(stack, timeout_s=limit_s) as api:
        while time.monotonic() - since < limit_s:
            try:
                if api.post("/v1/sessions", json={}).status_code == 201:
                    return time.monotonic() - since
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
    raise AssertionError(f"not serving {limit_s} s after the fault:\n{stack.log()[-3000:]}")


def test_a_writer_sigkill_delays_an_acknowledged_run_and_the_stack_serves_within_5s(
    fstack: Stack, disk: Path
) -> None:
    with _api(fstack) as api:
        sid, run_id = _send(api)
        _wait_run(api, sid, run_id, ("running",))
        old, killed = _kill_process(_writer(disk))
        serving = _serving_again(fstack, killed)
        print(f"\nwriter SIGKILL: serving again after {serving:.2f}s")  # bench/faults.py: < 5 s
        assert _writer(disk).pid != old  # the standby took over
        run = _wait_run(api, sid, run_id, TERMINAL)
        assert (run["status"], run["end_reason"]) == ("completed", "completed"), run
        assert "storage_writer.1 exited with -9" in fstack.log() or (
            "storage_writer.2 exited with -9" in fstack.log()
        )


def test_an_acknowledged_run_outlasts_a_writer_outage(fstack: Stack, disk: Path) -> None:
    with _api(fstack) as api:
        sid, run_id = _send(api)
        _wait_run(api, sid, run_id, ("running",))
        owner = _writer(disk)
        owner.suspend()  # alive, lock held, answering nothing: an outage, not a takeover
        try:
            # The run's storage calls have timed out past a request's retry budget (5 tries).
            deadline = time.monotonic() + 60
            while re.search(r"has not answered \w+ 6 times", fstack.log()) is None:
                assert time.monotonic() < deadline, fstack.log()[-3000:]
                time.sleep(0.05)
        finally:
            owner.resume()
        run = _wait_run(api, sid, run_id, TERMINAL)
        assert (run["status"], run["end_reason"]) == ("completed", "completed"), run


def test_a_message_refused_during_an_outage_leaves_no_run_behind(fstack: Stack, disk: Path) -> None:
    with _api(fstack) as api:
        session = api.post("/v1/sessions", json={})
        assert session.status_code == 201, session.text
        sid = session.json()["session_id"]
        owner = _writer(disk)
        owner.suspend()  # the message's commands wait in the bus past the gateway's budget
        try:
            refused = api.post(f"/v1/sessions/{sid}/messages", json={"text": "lost?"})
        finally:
            owner.resume()
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "bus_timeout"
        # The writer applies what waited once it runs again: the run's creation is refused as
        # expired, so nothing is left queued that nobody will ever queue.
        serving = _serving_again(fstack, time.monotonic())
        print(f"\nwriter outage: serving again {serving:.2f}s after resuming")
        runs = api.get(f"/v1/sessions/{sid}/runs")
        assert runs.status_code == 200, runs.text
        assert runs.json()["items"] == []
        posted = api.post(f"/v1/sessions/{sid}/messages", json={"text": "again"})
        assert posted.status_code == 202, posted.text  # and the session works
        run = _wait_run(api, sid, posted.json()["run_id"], TERMINAL)
        assert run["status"] == "completed", run
        assert [r["run_id"] for r in api.get(f"/v1/sessions/{sid}/runs").json()["items"]] == [
            run["run_id"]
        ]


def test_the_bus_is_restarted_with_its_data_and_answers_503_while_down(fstack: Stack) -> None:
    with _api(fstack, timeout_s=10) as api:
        sid, run_id = _send(api)
        _wait_run(api, sid, run_id, TERMINAL)
        valkey = _child(fstack, "valkey-server")
        services = {p.pid for p in _children_serving(fstack)}
        supervisor = psutil.Process(fstack.process.pid)
        supervisor.suspend()  # hold the restart back, to look at the stack while the bus is down
        try:
            valkey.send_signal(signal.SIGKILL)
            while valkey.is_running() and valkey.status() != psutil.STATUS_ZOMBIE:
                time.sleep(0.01)  # (its parent is suspended: it stays a zombie until resumed)
            down = api.get(f"/v1/sessions/{sid}")
            assert down.status_code == 503, down.text
            assert down.headers["retry-after"] == "1"
            assert down.json()["error"]["code"] in ("bus_unavailable", "bus_timeout")
        finally:
            supervisor.resume()
        resumed = time.monotonic()
        deadline = resumed + 60
        while True:  # the same key authenticates: the bus came back with its data
            with contextlib.suppress(httpx.HTTPError):
                if api.get(f"/v1/sessions/{sid}").status_code == 200:
                    break
            assert time.monotonic() < deadline, fstack.log()[-3000:]
            time.sleep(0.05)
        print(
            f"\nvalkey SIGKILL: serving again {time.monotonic() - resumed:.2f}s after its restart"
        )
        assert "valkey restarted" in fstack.log()
        assert _child(fstack, "valkey-server").pid != valkey.pid
        # Every service rode out the drop (none crashed and was restarted by the supervisor).
        assert {p.pid for p in _children_serving(fstack)} == services
        sid2, run2 = _send(api)  # and runs run again
        run = _wait_run(api, sid2, run2, TERMINAL)
        assert run["status"] == "completed", run


def test_stream_slots_of_a_killed_gateway_expire_with_it(fstack: Stack) -> None:
    with _api(fstack) as api:
        sid, run_id = _send(api)
        events = f"/v1/sessions/{sid}/runs/{run_id}/events"
        with contextlib.ExitStack() as held:
            for _ in range(2):  # the key's two slots, held by open streams of this gateway
                stream = held.enter_context(_api(fstack)).stream("GET", events)
                assert held.enter_context(stream).status_code == 200
            refused = api.get(events)
            assert refused.status_code == 429, refused.text
            _, killed = _kill(fstack, "serve gateway")
        deadline = killed + 60
        while True:  # a new gateway, and the dead one's slots gone with it
            with contextlib.suppress(httpx.HTTPError):
                if (reply := api.get(events)).status_code == 200:
                    break
                assert reply.status_code == 429, reply.text
            assert time.monotonic() < deadline, fstack.log()[-3000:]
            time.sleep(0.05)
        print(f"\ngateway SIGKILL: a stream slot free again after {time.monotonic() - killed:.2f}s")


def _fill(disk: Path) -> Path:
    """Fill the database's filesystem to the last byte; the filler file."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (1 << 20, 1 << 12, 1):
            with contextlib.suppress(OSError):  # ENOSPC: go on with smaller pieces
                while True:
                    out.write(b"\0" * chunk)
    return filler


def test_a_full_disk_is_reported_as_507_and_the_stack_recovers_by_itself(
    fstack: Stack, disk: Path
) -> None:
    with _api(fstack) as api:
        # Acknowledged before the disk fills, in flight while it is; its answer needs new pages.
        sid, run_id = _send(api, BIG)
        _wait_run(api, sid, run_id, ("running",))
        filler = _fill(disk)
        full = time.monotonic()
        guard = HangGuard(60, "the disk to fill up")
        try:
            while True:  # every new session needs new pages: the disk has none left
                reply = api.post("/v1/sessions", json={})
                if reply.status_code != 201:
                    break
                guard.check()
            reported = time.monotonic() - full
            print(f"\nfull disk reported after {reported:.2f}s")
            assert reply.status_code == 507, reply.text
            assert reply.json()["error"]["code"] == "storage_full"
            assert reply.headers["retry-after"] == "1"
            # The acknowledged run reaches its own writes meanwhile: refused, it waits for space.
            deadline = time.monotonic() + 60
            while "waits for space" not in fstack.log():
                assert time.monotonic() < deadline, fstack.log()[-3000:]
                time.sleep(0.05)
            held = _run(api, sid, run_id)  # reads still work, and the run is held, not failed
            assert held is not None and held["status"] == "running", held
        finally:
            filler.unlink()
        freed = time.monotonic()
        recovered = _serving_again(fstack, freed)
        print(f"full disk: serving again {recovered:.2f}s after space returned")
        run = _wait_run(api, sid, run_id, TERMINAL)
        assert (run["status"], run["end_reason"]) == ("completed", "completed"), run


def test_an_open_stream_rides_out_a_bus_restart(fstack: Stack) -> None:
    """Valkey SIGKILLed (and restarted by `up`) while a run's answer streams: the open SSE
    response is not cut; it waits for the bus and goes on to the run's end, each event once."""
    with _api(fstack) as api:
        sid, run_id = _send(api)
        lines: list[str] = []
        failure: list[BaseException] = []
        first_piece = threading.Event()

        def read() -> None:
            try:
                with api.stream("GET", f"/v1/sessions/{sid}/runs/{run_id}/events") as reply:
                    for line in reply.iter_lines():
                        lines.append(line)
                        if "piece" in line:
                            first_piece.set()
            except BaseException as exc:  # the failure this test is about: a cut response
                failure.append(exc)
            finally:
                first_piece.set()

        reader = threading.Thread(target=read)
        reader.start()
        assert first_piece.wait(60)
        _kill(fstack, "valkey-server")
        reader.join(timeout=120)
        assert not reader.is_alive()
        assert failure == [], failure
        ids = [line[4:] for line in lines if line.startswith("id: ")]
        events = [line[7:] for line in lines if line.startswith("event: ")]
        assert events[-1] == "run_finished", lines[-10:]
        assert len(ids) == len(set(ids)), "an event was sent twice"
        assert "unhandled RuntimeError" not in fstack.log()
