"""The attack suite: agent code that tries to walk through the walls between accounts.

Each attack is a ``run_python`` call that a scripted model makes in a real agent turn, run by
real run-worker subprocesses with the bubblewrap sandbox. Each must be refused or bounded, the run
must get a clear tool error, and another account's turn at the same time must complete in about
its normal time. Nothing here skips: without a working sandbox the workers offer no code tools
and every attack fails loudly (CI installs bubblewrap).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.integration.run_worker.harness import (
    BusClient,
    Cluster,
    last_role,
    last_user_text,
    text_answer,
    tool_calls_turn,
)

# One cluster for the tests that neither kill nor attack the worker process (conftest.py).
SHARED_CLUSTER = True

SANDBOX = """
[sandbox]
timeout_s = 6
memory_mb = 512
max_processes = 32
write_quota_mb = 32
min_free_disk_mb = 0
"""
SECRET = "alice-secret-7f3a9c"


def attacks(home: Path, worker_pid: int, redis_port: int, host_port: int) -> dict[str, str]:
    """Attack name → the script the model runs. Each prints LEAKED if it got through."""
    return {
        "other_workspace": (
            "import glob\n"
            f"hits = glob.glob('{home}/accounts/*/sessions/*/output/*')\n"
            "hits += glob.glob('/workspace/../accounts/*/sessions/*/output/*')\n"
            "for path in hits:\n"
            "    if 'alice' in path: print('LEAKED', open(path).read())\n"
            f"print(open('{home}/accounts/alice/secret.txt').read())"
        ),
        "worker_environ": (
            "import glob\n"
            "for path in glob.glob('/proc/*/environ'):\n"
            "    data = open(path, 'rb').read()\n"
            "    if b'OPENAI_API_KEY' in data or b'SOONG_REDIS_URL' in data: print('LEAKED', path)\n"
            f"print(open('/proc/{worker_pid}/environ', 'rb').read())"
        ),
        "sqlite_files": (
            "import glob, sqlite3\n"
            f"for path in glob.glob('{home}/**/*.sqlite*', recursive=True):\n"
            "    print('LEAKED', path)\n"
            f"con = sqlite3.connect('file:{home}/sessions.sqlite?mode=ro', uri=True)\n"
            "print(con.execute('select * from sqlite_master').fetchall())"
        ),
        "redis": (
            "import socket\n"
            f"s = socket.create_connection(('127.0.0.1', {redis_port}), timeout=2)\n"
            "s.sendall(b'PING\\r\\n'); print('LEAKED', s.recv(64))"
        ),
        "network": (  # the host's port is even listed for the proxy: straight, it is no route
            "import socket\n"
            f"s = socket.create_connection(('127.0.0.1', {host_port}), timeout=2)\n"
            "print('LEAKED', s.recv(64))"
        ),
        "proxy_to_redis": (  # through the worker's proxy: only the listed host and port
            "import urllib.request\n"
            f"data = urllib.request.urlopen('http://127.0.0.1:{redis_port}/').read()\n"
            "print('LEAKED', data)"
        ),
        "fork_bomb": (
            "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30)\n"
        ),
        "fill_disk": (
            "chunk = b'x' * (1024 * 1024)\n"
            "for i in range(100_000):\n"
            "    open(f'../output/fill{i}', 'wb').write(chunk)\n"
            "print('LEAKED: wrote 100 GB')"
        ),
        "allocate": "big = bytearray(8 * 1024 ** 3)\nprint('LEAKED: allocated 8 GiB')",
        "past_time": "import time\ntime.sleep(600)\nprint('LEAKED: ran 10 minutes')",
    }


EXPECTED = {  # what the tool error must say, per attack
    "other_workspace": "FileNotFoundError",
    "worker_environ": "FileNotFoundError",
    "sqlite_files": "unable to open database file",
    "redis": "ConnectionRefusedError",
    "network": "ConnectionRefusedError",
    "proxy_to_redis": "HTTP Error 403: Forbidden",
    "fork_bomb": "BlockingIOError",
    "fill_disk": "stopped: it wrote more than 32 MiB",
    "allocate": "MemoryError",
    "past_time": "timed out after 6 s",
}


def _model(scripts: dict[str, str]) -> Any:
    def answer(request: Any) -> Any:
        if last_role(request) == "tool":
            return text_answer("done")
        name = last_user_text(request)
        if name not in scripts:
            return text_answer(f"hello {name}")
        return tool_calls_turn((f"call_{name}", "run_python", {"code": scripts[name]}))

    return answer


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on the host's loopback that answers anyone who connects."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    yield server.getsockname()[1]
    server.close()


async def _tool_result(client: BusClient, sid: str) -> tuple[str, bool]:
    tools = [n for n in await client.tree(sid) if n["role"] == "tool"]
    assert len(tools) == 1, tools
    node = (await client.path(sid, tools[0]["node_id"]))[-1]
    content = json.loads(node["content_json"])
    result = next(b for b in content if b["type"] == "tool_result")
    text = "".join(b.get("text", "") for b in result["content"])
    return text, bool(result["is_error"])


async def _turn(client: BusClient, account: str, text: str) -> tuple[str, str]:
    sid = await client.new_session(account)
    return sid, (await client.send(sid, text, account=account)).run_id


async def _finished_at(client: BusClient, run_id: str, timeout_s: float = 60) -> float:
    await client.wait_terminal([run_id], timeout_s=timeout_s)
    return time.monotonic()


@pytest.mark.own_cluster  # attacks the worker itself
async def test_attacks_are_refused_or_bounded_and_others_are_unaffected(
    make_cluster: Any, client: BusClient, redis_url: str, host_server: int
) -> None:
    home = client.home
    secret = home / "accounts" / "alice" / "secret.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text(SECRET)
    scripts: dict[str, str] = {}
    allowed = f'allowed_hosts = ["127.0.0.1:{host_server}"]\n'
    cluster: Cluster = make_cluster(_model(scripts), workers=2, extra_config=SANDBOX + allowed)
    await client.wait_ready(("storage_writer", "run_worker"))
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    scripts.update(attacks(home, cluster.worker_pid(0), redis_port, host_server))

    # Alice's normal turn, alone: the time it takes.
    started = time.monotonic()
    _, alone = await _turn(client, "alice", "plain")
    normal_s = await _finished_at(client, alone) - started

    # Every attack at once, and Alice's turn in the same second.
    attacks_started = time.monotonic()
    runs = {name: await _turn(client, "mallory", name) for name in scripts}
    _, alice = await _turn(client, "alice", "plain")
    alice_s = await _finished_at(client, alice) - attacks_started
    finished = await client.wait_terminal([r for _, r in runs.values()], timeout_s=90)
    attacks_s = time.monotonic() - attacks_started

    for name, (sid, run_id) in runs.items():
        text, is_error = await _tool_result(client, sid)
        assert is_error, (name, text)
        assert EXPECTED[name] in text, (name, text)
        assert "LEAKED" not in text and SECRET not in text, (name, text)
        assert "sk-test-not-a-real-key" not in text, (name, text)
        assert finished[run_id]["status"] == "completed", (name, finished[run_id])
    # Alice finished while the longest attack was still held by its limit, in about her time.
    assert alice_s < attacks_s, (alice_s, attacks_s)
    assert alice_s < max(4 * normal_s, normal_s + 3.0), (alice_s, normal_s)
    # Nothing of any attack is left running.
    assert _scripts_of([sid for sid, _ in runs.values()]) == []
    print(
        f"\nwalls: alice alone {normal_s:.2f}s, during attacks {alice_s:.2f}s; all {attacks_s:.1f}s"
    )


def _children_of(proc: psutil.Process) -> list[psutil.Process]:
    """Every descendant of ``proc`` (none if it has ended)."""
    try:
        return list(proc.children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def _running(proc: psutil.Process) -> bool:
    """Whether ``proc`` can still run code: alive and not a zombie."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _scripts_of(session_ids: list[str]) -> list[psutil.Process]:
    """The run_python processes still alive for these sessions, on this whole machine.

    A sandboxed script's cwd reads the same for every sandbox, so it is recognised by its
    mounts: its mount table names the session folder bound into it. Other tests' and other
    suites' sandboxes (on parallel workers) are not ours.
    """
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if ".run_python_" not in " ".join(proc.info["cmdline"] or []):
                continue
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            mounts = Path(f"/proc/{proc.pid}/mountinfo").read_text()
        except (psutil.NoSuchProcess, FileNotFoundError, ProcessLookupError):
            continue
        except OSError as exc:
            # A process past exit_task_namespaces has no mount namespace left: the kernel
            # answers EINVAL for its mountinfo. It can run no more code, so it is gone.
            if exc.errno == errno.EINVAL:
                continue
            raise
        if any(sid in mounts for sid in session_ids):
            found.append(proc)
    return found


@pytest.mark.own_cluster  # kills its worker
async def test_code_dies_with_its_worker(make_cluster: Any, client: BusClient) -> None:
    """SIGKILL of the worker takes the sandbox down: the script never does its side effect."""
    code = (
        "import time\nopen('started', 'w').write('1')\ntime.sleep(4)\n"
        "open('../output/side_effect.txt', 'w').write('done after its run ended')"
    )
    scripts = {"slow": code}
    cluster: Cluster = make_cluster(_model(scripts), workers=1, extra_config=SANDBOX)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid, run_id = await _turn(client, "mallory", "slow")
    workspace = client.home / "accounts" / "mallory" / "sessions" / sid
    for _ in range(400):
        if (workspace / "scratchpad" / "started").exists():
            break
        await asyncio.sleep(0.05)
    assert (workspace / "scratchpad" / "started").exists(), cluster.log_text()[-3000:]
    running = _scripts_of([sid])
    assert running, "the running script is not recognised by its mounts"
    # Each of its processes, and what they started: the ones that could still write.
    watched = {p for proc in running for p in [proc, *_children_of(proc)]}
    cluster.signal_worker(0, signal.SIGKILL)
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline and _scripts_of([sid]):
        await asyncio.sleep(0.1)
    assert _scripts_of([sid]) == [], "the script outlived its worker"
    # The event that proves the negative: every process that could write has ended (a zombie
    # runs no code), so the side effect can no longer happen; no sleep past its moment.
    deadline = time.monotonic() + 10
    while (alive := [p for p in watched if _running(p)]) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert alive == [], f"still running after its worker died: {alive}"
    assert not (workspace / "output" / "side_effect.txt").exists()
    assert os.listdir(workspace / "output") == []


async def test_a_tool_the_agent_was_not_given_is_refused(
    make_cluster: Any, client: BusClient
) -> None:
    """Hiding a tool's definition is not the wall: the executor refuses the call itself."""
    code = "open('../output/should_not_exist.txt', 'w').write('ran')"
    make_cluster(_model({"sneaky": code}), workers=1, extra_config=SANDBOX)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session("mallory")
    overrides = {"enabled_tools": ["read_file"]}
    run_id = (await client.send(sid, "sneaky", account="mallory", overrides=overrides)).run_id
    await client.wait_terminal([run_id])
    text, is_error = await _tool_result(client, sid)
    assert is_error and "not enabled for this agent: 'run_python'" in text, text
    output = client.home / "accounts" / "mallory" / "sessions" / sid / "output"
    assert not (output / "should_not_exist.txt").exists()


async def test_the_worst_grep_never_stalls_the_worker(make_cluster: Any, client: BusClient) -> None:
    """``(a+)+$`` over the largest file grep reads: the worker answers its health ping all along
    (with Python's re the search would hold the interpreter for good). How fast it answers is
    ``bench/responsiveness.py``'s figure."""
    from agent_core.service import ping_service

    def model(request: Any) -> Any:
        if last_role(request) == "tool":
            return text_answer("done")
        return tool_calls_turn(
            ("call_grep", "grep", {"pattern": "(a+)+$", "path": "input/evil.txt"})
        )

    make_cluster(model, workers=1, extra_config=SANDBOX)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session("mallory")
    evil = client.home / "accounts" / "mallory" / "sessions" / sid / "input" / "evil.txt"
    evil.parent.mkdir(parents=True)
    evil.write_text("a" * (4 * 1024 * 1024 - 2) + "!\n")
    run_id = (await client.send(sid, "search", account="mallory")).run_id
    slowest = 0.0
    while (await client.run(run_id))["status"] not in ("completed", "failed"):
        started = time.monotonic()
        reply = await ping_service(client.ctx, "run_worker", timeout_s=30.0)  # a hang guard
        assert reply.ok
        slowest = max(slowest, time.monotonic() - started)
        await asyncio.sleep(0.1)
    text, is_error = await _tool_result(client, sid)
    assert not is_error and text.startswith("No matches"), text
    print(f"\nworker ping during the worst grep: slowest {slowest:.3f}s")
