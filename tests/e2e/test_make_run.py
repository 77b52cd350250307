"""`make run` brings the stack up (readyz 200 within 30 s) and Ctrl-C leaves no process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import psutil
import pytest

from agent_core.service.valkey import find_free_port
from tests.conftest import REPO

pytestmark = pytest.mark.e2e


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _start(home: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    port = find_free_port()
    env = {
        **os.environ,
        "SOONG_AGENT_HOME": str(home),
        "SOONG_GATEWAY_PORT": str(port),
        "OPENAI_API_KEY": "sk-test-not-a-real-key-000000",  # the default model's variable
    }
    env.pop("SOONG_REDIS_URL", None)
    started = time.monotonic()
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, like a terminal's foreground job
    )
    return proc, f"http://127.0.0.1:{port}", started


def _wait_ready(proc: subprocess.Popen[bytes], url: str, started: float, within_s: float) -> float:
    while time.monotonic() - started < within_s:
        assert proc.poll() is None, "make run exited early"
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"/readyz not 200 within {within_s} s")


def _assert_all_gone(procs: list[psutil.Process], within_s: float) -> None:
    _, alive = psutil.wait_procs(procs, timeout=within_s)
    names = [
        (p.pid, p.name()) for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    ]
    for p in alive:
        p.kill()
    assert not names, f"left behind: {names}"


@pytest.mark.parametrize("target", ["ctrl_c", "kill_make"])
def test_make_run_ready_then_stop_leaves_nothing(tmp_path: Path, target: str) -> None:
    proc, url, started = _start(tmp_path / "home")
    try:
        _wait_ready(proc, url, started, within_s=60)  # a hang guard: raises past it
        procs = _tree(proc.pid)
        names = " ".join(" ".join(p.cmdline()) for p in procs)
        served = sorted(re.findall(r"agent_core\.cli serve (\w+)", names))
        # The storage-writer runs twice: the one holding the database's lock and a warm standby.
        assert "valkey-server" in names and served == [
            "gateway",
            "memory_extraction",
            "run_worker",
            "run_worker",
            "storage_writer",
            "storage_writer",
            "task_wal",
        ]
        if target == "ctrl_c":  # a terminal's Ctrl-C: SIGINT to the foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        else:  # `kill <pid of make>`: make forwards SIGTERM to its child, the stack goes down
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        _assert_all_gone(procs, within_s=30)
        assert not (tmp_path / "home" / "run" / "stack.json").exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
