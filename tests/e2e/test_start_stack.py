"""The tests' own stack starter: a gateway port that another process took meanwhile is noticed.

``start_stack`` picks the gateway's port seconds before the gateway binds it; another test's
stack may be handed that port for an ops server in between (a CI run failed this way: every
request of a module went to an ops port and answered 404). Here a stand-in ops server holds the
first port picked."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

import tests.conftest as conftest
from tests.conftest import start_stack, stop_stack


class _OpsLike(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"ready": True, "service": "storage_writer"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port on which an ops server's look-alike answers /readyz 200."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OpsLike)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_a_gateway_port_taken_meanwhile_starts_the_stack_again(
    tmp_path: Path, taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks = iter([taken_port])
    real = conftest.find_free_port
    monkeypatch.setattr(conftest, "find_free_port", lambda: next(picks, None) or real())
    stack = start_stack(tmp_path / "home", workers=1, extra_env={"SOONG_MODEL_PROVIDER": "fake"})
    try:
        assert stack.gateway_url != f"http://127.0.0.1:{taken_port}"
        ready = httpx.get(f"{stack.gateway_url}/readyz", timeout=10).json()
        assert ready["ready"] is True and "services" in ready
        assert stack.api_key.startswith("sa_live_")  # the key of the first try, found again
    finally:
        stop_stack(stack.process)
