"""Network for sandboxed code, host by host: with ``allowed_hosts`` a real bubblewrap sandbox
reaches exactly the listed hosts and ports through the worker's proxy, and nothing else — not
another port, not another name for the same address, not the host's loopback directly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_core.config.hosts import parse_host_entry
from agent_core.tools import Workspace
from agent_core.tools.sandbox import BwrapRunner, SandboxConfig, SandboxLimits
from agent_core.tools.sandbox.proxy import HostRules

LIMITS = SandboxLimits(timeout_s=30, min_free_disk_bytes=0)

_PROBE = """
import json, socket, urllib.error, urllib.request
OK, NO = {ok}, {no}
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=10).read().decode()
    except urllib.error.HTTPError as exc:
        return f"HTTP {{exc.code}}: {{exc.read().decode().strip()}}"
    except OSError as exc:
        return type(exc).__name__
def tunnel(target):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(f"CONNECT {{target}} HTTP/1.1\\r\\nHost: {{target}}\\r\\n\\r\\n".encode())
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        head += s.recv(1)
    if b" 200 " not in head.split(b"\\r\\n")[0]:
        return head.split(b"\\r\\n")[0].decode()
    s.sendall(b"GET /tunnelled HTTP/1.0\\r\\n\\r\\n")
    data = b""
    while chunk := s.recv(4096):
        data += chunk
    return data.decode().split("\\r\\n\\r\\n", 1)[1]
def direct(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3)
        return "LEAKED"
    except OSError as exc:
        return type(exc).__name__
print(json.dumps({{
    "allowed": get(f"http://127.0.0.1:{{OK}}/plain"),
    "other_port": get(f"http://127.0.0.1:{{NO}}/plain"),
    "other_name": get(f"http://localhost:{{OK}}/plain"),
    "tunnel": tunnel(f"127.0.0.1:{{OK}}"),
    "tunnel_other_port": tunnel(f"127.0.0.1:{{NO}}"),
    "direct": direct(OK),
}}))
"""


async def _http_server(name: str) -> asyncio.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")[0].decode()
        body = f"{name} got {line.split()[1]}".encode()
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0)


@pytest.fixture
async def servers() -> AsyncIterator[tuple[int, int]]:
    """Two HTTP servers on the host's loopback: one to allow, one that stays unlisted."""
    ok, no = await _http_server("allowed"), await _http_server("unlisted")
    try:
        yield ok.sockets[0].getsockname()[1], no.sockets[0].getsockname()[1]
    finally:
        for server in (ok, no):
            server.close()
            await server.wait_closed()


async def test_only_the_listed_host_and_port_are_reached(
    tmp_path: Path, servers: tuple[int, int]
) -> None:
    ok, no = servers
    ws = Workspace(tmp_path / "home", "acct_1", "sess_1")
    ws.ensure()
    runner = BwrapRunner(SandboxConfig(allowed_hosts=(f"127.0.0.1:{ok}",)))
    try:
        code = _PROBE.format(ok=ok, no=no)
        result = await runner.run(["python3", "-c", code], ws, LIMITS)
        assert result.ok, result
        seen = json.loads(result.stdout)
        assert seen["allowed"] == "allowed got /plain"
        assert seen["tunnel"] == "allowed got /tunnelled"
        for refused, target in (
            ("other_port", f"127.0.0.1:{no}"),
            ("other_name", f"localhost:{ok}"),
        ):
            assert seen[refused] == f"HTTP 403: {target} is not in sandbox.allowed_hosts"
        assert seen["tunnel_other_port"].startswith("HTTP/1.1 403")
        assert seen["direct"] == "ConnectionRefusedError"  # no route but the proxy
        assert runner.proxy is not None and runner.proxy.socket_path is not None
        socket_path = runner.proxy.socket_path
        again = await runner.run(["python3", "-c", "print('second call')"], ws, LIMITS)
        assert again.ok and again.stdout.strip() == "second call"  # the proxy is reused
    finally:
        await runner.close()
    assert runner.proxy is not None and runner.proxy.socket_path is None
    assert not Path(socket_path).parent.exists()  # the socket's folder went with the proxy


async def test_without_allowed_hosts_there_is_no_proxy(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home", "acct_1", "sess_1")
    ws.ensure()
    runner = BwrapRunner(SandboxConfig())
    assert runner.proxy is None
    code = "import os; print(sorted(k for k in os.environ if 'PROXY' in k.upper()))"
    result = await runner.run(["python3", "-c", code], ws, LIMITS)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("host", "port", "allowed"),
    [
        ("data.example.org", 443, True), ("Data.Example.org.", 80, True),
        ("data.example.org", 22, False), ("evil-data.example.org", 443, False),
        ("files.example.com", 8443, True),
        ("example.com", 8443, False), ("a.b.example.com", 8443, True),
        ("files.example.com", 443, False), ("::1", 6379, True), ("::1", 6380, False),
    ],
)  # fmt: skip
def test_host_rules(host: str, port: int, allowed: bool) -> None:
    rules = HostRules.of(["data.example.org", "*.example.com:8443", "[::1]:6379"])
    assert rules.allows(host, port) is allowed


@pytest.mark.parametrize("bad", ["a/b", "*", "a.*.com", "x:0", "x:70000", "x:http", "[::1", ""])
def test_bad_entries_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_host_entry(bad)
