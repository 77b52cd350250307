"""The harness's Valkey starts even when the port it was given is taken before it binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import redis

from tests.multinode.harness import HostValkey


def test_a_port_taken_meanwhile_is_replaced_by_a_free_one(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        valkey = HostValkey(tmp_path / "valkey", "127.0.0.2", port)
        try:
            valkey.start()
            assert valkey.port != port
            client = redis.Redis.from_url(valkey.local_url)
            try:
                assert client.ping()
            finally:
                client.close()
        finally:
            valkey.stop()
