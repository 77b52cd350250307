"""Secrets out of reach on a running stack: the bus requires its password, which no process
carries in its arguments and only its owner can read."""

from __future__ import annotations

import json
import stat

import psutil
import pytest
import redis

from tests.e2e.gateway.conftest import Gw, new_session

pytestmark = pytest.mark.e2e


def _stack_processes(gw: Gw) -> list[psutil.Process]:
    root = psutil.Process(gw.stack.process.pid)
    return [root, *root.children(recursive=True)]


def test_the_bus_requires_its_password_which_no_argv_holds(gw: Gw) -> None:
    password_file = gw.stack.home / "redis" / "password"
    password = password_file.read_text().strip()
    assert len(password) >= 32
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    stack_file = gw.stack.home / "run" / "stack.json"
    assert stat.S_IMODE(stack_file.stat().st_mode) == 0o600
    port = int(json.loads(stack_file.read_text())["redis_url"].rsplit(":", 1)[1])
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=port, socket_timeout=3).ping()
    assert redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=3).ping()
    processes = _stack_processes(gw)
    assert any("valkey" in " ".join(p.cmdline()) for p in processes)
    for proc in processes:
        assert password not in " ".join(proc.cmdline()), proc.cmdline()


def test_the_server_owns_its_paths(gw: Gw) -> None:
    """A session names a project, never a server path; refused names leave nothing behind."""
    accounts = gw.stack.home / "accounts" / "dev" / "sessions"
    before = set(accounts.iterdir()) if accounts.exists() else set()
    with gw.client() as client:
        for bad in ("/etc", "/tmp", "../../x", "nope/x", "x\u0000"):
            answer = client.post("/v1/sessions", json={"cwd": bad})
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["code"] in ("invalid_cwd", "validation_error")
        assert (set(accounts.iterdir()) if accounts.exists() else set()) == before
        sid = new_session(client)
        body = client.get(f"/v1/sessions/{sid}").json()
        assert body["cwd"] == "workspace"
        listed = client.get("/v1/sessions").text + client.get(f"/v1/sessions/{sid}/tasks").text
    assert str(gw.stack.home) not in str(body) + listed
