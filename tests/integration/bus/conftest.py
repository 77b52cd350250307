"""Fixtures of the bus's integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_core.service.valkey import EmbeddedValkey


@pytest.fixture
def own_valkey(tmp_path: Path) -> Iterator[EmbeddedValkey]:
    """A Valkey of this test alone (it is restarted or paused), with a password and a unix
    socket."""
    server = EmbeddedValkey(
        tmp_path, appendonly=False, password="s3cr:et/pw", unix_socket=tmp_path / "v.sock"
    )
    server.start()
    yield server
    server.stop()
