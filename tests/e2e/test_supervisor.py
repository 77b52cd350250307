"""`soong-agent up` restarts a child that dies and answers readiness again."""

from __future__ import annotations

import signal
import time

import httpx
import psutil
import pytest

from tests.conftest import Stack

pytestmark = pytest.mark.e2e


def _child(stack: Stack, needle: str) -> psutil.Process | None:
    for proc in psutil.Process(stack.process.pid).children(recursive=True):
        try:
            if needle in " ".join(proc.cmdline()):
                return proc
        except psutil.NoSuchProcess:
            continue
    return None


def test_killed_service_is_restarted_and_stack_is_ready_again(stack: Stack) -> None:
    victim = _child(stack, "serve task_wal")
    assert victim is not None
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)

    deadline = time.monotonic() + 30
    replacement = None
    while time.monotonic() < deadline:
        replacement = _child(stack, "serve task_wal")
        if replacement is not None and replacement.pid != victim.pid:
            break
        time.sleep(0.1)
    assert replacement is not None and replacement.pid != victim.pid, "task_wal was not restarted"
    assert "task_wal exited with -9" in stack.log()

    while time.monotonic() < deadline:
        if httpx.get(f"{stack.gateway_url}/readyz", timeout=3).status_code == 200:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("stack not ready again after the restart")
    assert httpx.get(f"{stack.gateway_url}/healthz", timeout=3).json() == {"status": "ok"}
    # The gateway builds its OpenAPI document on the first request for it (a second of CPU on
    # a quiet machine, several with every core busy): the answer is what is checked, not its time.
    assert httpx.get(f"{stack.gateway_url}/openapi.json", timeout=30).status_code == 200
