"""The services of ``up`` reach its embedded Valkey by its unix socket, the socket is its owner's
alone, and a run goes through; ``run/stack.json`` keeps naming the TCP address for other clients.
A home whose socket path would be too long for a socket's name keeps TCP alone."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import redis

from services.stack.up import local_socket
from tests.conftest import run_one_message, start_stack, stop_stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def _clients(url: str) -> list[dict[str, str]]:
    """Every connection the server has, but the one asking."""
    client = redis.Redis.from_url(url)
    try:
        me = int(client.client_id())
        return [c for c in client.client_list() if int(c["id"]) != me]
    finally:
        client.close()


def test_the_services_talk_to_the_embedded_valkey_by_its_socket(tmp_path: Path) -> None:
    home = tmp_path / "home"
    stack = start_stack(home, workers=1, extra_env={"SOONG_MODEL_PROVIDER": "fake"})
    try:
        socket = local_socket(home)
        assert socket is not None and socket.is_socket()
        assert stat.S_IMODE(socket.stat().st_mode) == 0o700
        url = json.loads((home / "run" / "stack.json").read_text())["redis_url"]
        assert url.startswith("redis://") and url.rpartition("@")[2].startswith("127.0.0.1:")
        assert run_one_message(stack.gateway_url, stack.api_key)[2][-1] == "event: run_finished"
        clients = _clients(url)
        # Six services (two writers), each with a few connections: none of them over TCP (the
        # server names a unix client by its socket's path, cut to its first 46 characters).
        assert len(clients) >= 6, clients
        addrs = {c["addr"].removesuffix(":0") for c in clients}
        assert all(a.startswith("/") and str(socket).startswith(a) for a in addrs), addrs
    finally:
        stop_stack(stack.process)


def test_a_home_too_deep_for_a_socket_name_keeps_tcp(tmp_path: Path) -> None:
    shallow = tmp_path / "h"
    assert local_socket(shallow) == shallow.resolve() / "redis" / "valkey.sock"
    deep = tmp_path / ("d" * 100)
    assert local_socket(deep) is None
