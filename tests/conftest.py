"""Test harness: outbound network blocked, a private Valkey per run, unique bus names per test,
and the whole stack via ``soong-agent up`` for end-to-end tests."""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from redis.asyncio import Redis
from xdist.scheduler import LoadFileScheduling

from agent_core.bus import Bus, BusNames, make_redis
from agent_core.service.valkey import EmbeddedValkey, find_free_port
from tests.allowed_networks import ALLOWED

# One S3-compatible server (moto) per test session, shared by every module that asks for it: a
# module importing the fixture itself would start a server of its own.
from tests.engines.s3 import s3_server  # noqa: F401

REPO = Path(__file__).resolve().parents[1]

# The real local model's suite (``make test-local-model``) needs an environment that takes
# minutes to compile: collected only when that target names its interpreter.
collect_ignore = [] if os.environ.get("SOONG_LOCAL_MODEL_PYTHON") else ["local_model"]

# ------------------------------------------------------------------ the longest files go first

# With ``--dist loadfile`` each file goes whole to the next free pytest worker: a long file handed
# out last keeps one worker busy while the others idle. So the longest files (by ``--durations``
# on a loaded 2-core machine, setup included: a module fixture starting a stack) are handed out
# first, then the files that start stacks and kill processes (e2e, then integration), and the many
# short unit files fill in behind them. xdist would by default reorder the files by their number
# of tests, which sends the one-test files that take minutes (a backup under load) to the end:
# the scheduler below keeps this order.
_LONGEST = (
    "tests/e2e/gateway/",  # each folder of _ONE_WORKER is one unit
    "tests/e2e/console/",
    "tests/integration/run_worker/test_crash.py",
    "tests/e2e/test_backup.py",
    "tests/integration/provider/test_context_long.py",
    "tests/integration/mcp/test_client.py",
    "tests/unit/tools/test_fsaccess.py",
    "tests/integration/run_worker/test_mcp.py",
    "tests/multinode/test_hosts.py",
    "tests/multinode/test_files.py",
    "tests/multinode/test_postgres_writers.py",
    "tests/unit/tasks/test_properties.py",
    "tests/integration/run_worker/test_children.py",
    "tests/e2e/test_make_run.py",
    "tests/unit/memory/test_linear_patterns.py",
    "tests/e2e/test_one_stack_per_home.py",
    "tests/e2e/test_faults.py",
    "tests/unit/tools/test_paths.py",  # 3,000 property examples: half a minute, unit or not
    "tests/e2e/test_supervisor.py",
    "tests/e2e/sdk/test_local_home.py",
)
_TIERS = ("tests/e2e/", "tests/integration/")
# Folders whose files go to one pytest worker as one unit, so that a stack fixture they share
# (the gateway tests' stack, the console's stack and browser) starts once rather than once per
# worker.
_ONE_WORKER = ("tests/e2e/gateway/", "tests/e2e/console/")


def _rank(path: str) -> int | None:
    return next((i for i, long in enumerate(_LONGEST) if path.startswith(long)), None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order items longest files first, then by tier (stable: a file's items stay together and
    in order)."""

    def order(item: pytest.Item) -> tuple[int, int]:
        path = Path(str(item.path)).relative_to(REPO).as_posix()
        rank = _rank(path)
        if rank is not None:
            return 0, rank
        tier = next((i for i, prefix in enumerate(_TIERS) if path.startswith(prefix)), len(_TIERS))
        return 1 + tier, 0

    items.sort(key=order)


class _FilesInCollectionOrder(LoadFileScheduling):
    """``--dist loadfile`` that hands files out in collection order (longest first, above), and
    hands each folder of ``_ONE_WORKER`` out as one unit."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False  # read once, when the files are handed out

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return next((group for group in _ONE_WORKER if path.startswith(group)), path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadFileScheduling | None:
    """The scheduler of ``--dist loadfile`` (``make test``); the others are xdist's own."""
    if config.getoption("dist") != "loadfile":
        return None
    return _FilesInCollectionOrder(config, log)


# ------------------------------------------------------------------ per-process model memory


@pytest.fixture(autouse=True)
def _forget_learned_windows() -> Iterator[None]:
    """A context window learned from one test's fake server is not the next test's: the fakes
    share a provider and model name, and a worker process keeps what it learned."""
    from agent_core.context import WINDOWS

    WINDOWS.clear()
    yield
    WINDOWS.clear()


# ------------------------------------------------------------------ outbound network is blocked

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _allowed(address: object) -> bool:
    if isinstance(address, str | bytes):  # unix socket
        return True
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return False
        return ip.is_loopback or any(ip in net for net in ALLOWED)
    return False


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _allowed(address):
        raise ConnectionRefusedError(f"tests may only connect to loopback, not {address!r}")
    _real_connect(self, address)  # type: ignore[arg-type]


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _allowed(address):
        raise ConnectionRefusedError(f"tests may only connect to loopback, not {address!r}")
    return _real_connect_ex(self, address)  # type: ignore[arg-type]


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]

# ------------------------------------------------------------------ no process outlives the run


def _leftover_services(basetemp: Path) -> list[str]:
    """Service processes started by this run's tests (their home is under ``basetemp``)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if "agent_core.cli" not in " ".join(proc.info["cmdline"] or []):
                continue
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            env = proc.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if env.get("SOONG_AGENT_HOME", "").startswith(str(basetemp)):
            found.append(f"pid {proc.pid} from {env.get('PYTEST_CURRENT_TEST', '?')}")
    return found


@pytest.fixture(scope="session", autouse=True)
def no_leftover_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fail the run if a test left a service process behind (it would burn CPU for good)."""
    yield
    basetemp = tmp_path_factory.getbasetemp()
    deadline = time.monotonic() + 10
    while (left := _leftover_services(basetemp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for line in left:
        os.kill(int(line.split()[1]), signal.SIGKILL)
    assert not left, f"service processes outlived their tests: {left}"


# ------------------------------------------------------------------ Valkey and bus names


@pytest.fixture(scope="session")
def valkey(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkey]:
    """A private Valkey on a free loopback port and a unix socket for the whole run (no
    persistence needed)."""
    folder = tmp_path_factory.mktemp("valkey")
    server = EmbeddedValkey(folder, appendonly=False, unix_socket=folder / "valkey.sock")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(valkey: EmbeddedValkey) -> str:
    """URL of the private Valkey (TCP)."""
    return valkey.url


@pytest.fixture(scope="session", params=["tcp", "unix"])
def any_redis_url(request: pytest.FixtureRequest, valkey: EmbeddedValkey) -> str:
    """The private Valkey's URL over each transport in turn: TCP, then its unix socket."""
    return valkey.url if request.param == "tcp" else valkey.local_url


@pytest.fixture
def names() -> BusNames:
    """Unique stream and key names for one test."""
    return BusNames(f"t{secrets.token_hex(5)}")


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    """A redis-py client for one test."""
    client = make_redis(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def bus(redis: Redis) -> AsyncIterator[Bus]:
    """The test's bus client, made as a service context makes its own: over ``redis``."""
    client = Bus(redis)
    yield client
    await client.aclose()


# ------------------------------------------------------------------ the whole stack


@dataclass
class Stack:
    """A running ``soong-agent up``."""

    process: subprocess.Popen[bytes]
    home: Path
    gateway_url: str
    api_key: str
    log_path: Path

    def log(self) -> str:
        """Everything the stack printed so far."""
        return self.log_path.read_text(errors="replace")


def wait_until_answers(
    proc: subprocess.Popen[bytes], url: str, log: Path, *, timeout_s: float, what: str
) -> None:
    """Poll ``url`` until it answers 200; ``AssertionError`` with the end of ``log`` if ``proc``
    exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited early:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} not ready in {timeout_s:.0f} s:\n{log.read_text()[-4000:]}")


def start_stack(
    home: Path,
    *,
    workers: int = 2,
    extra_env: dict[str, str] | None = None,
    new_key: bool = True,
    args: Sequence[str] = (),
) -> Stack:
    """Start ``soong-agent up`` in its own process group and wait until /readyz answers 200.

    ``new_key=False``: the home already has its development key, so none is printed (``api_key``
    is then empty). ``args``: more of ``up``'s options (``--fake-provider``).

    The gateway's port is picked here and bound only once the gateway has started, seconds
    later; meanwhile another process (another test's stack giving its services ops ports) may
    be handed the same port by the kernel. Then the /readyz that answers is not the gateway's:
    the stack is stopped and started again on another port (three tries).
    """
    log_path = home / "up.log"
    home.mkdir(parents=True, exist_ok=True)
    offset = log_path.stat().st_size if log_path.exists() else 0  # a restart appends
    for _ in range(3):
        proc, url = _spawn_stack(home, workers, extra_env, args)
        # Generous: on a loaded 2-core machine six Python services can take a minute to import.
        try:
            wait_until_answers(proc, f"{url}/readyz", log_path, timeout_s=120, what="stack")
        except AssertionError:
            stop_stack(proc)
            raise
        if _is_gateway(url):
            break
        stop_stack(proc)
    else:
        raise AssertionError(f"another process answered on the gateway's port three times: {url}")
    printed = log_path.read_bytes()[offset:].decode(errors="replace")
    match = re.search(r"API key for account 'dev': (sa_live_[\w-]+)", printed)
    if bool(match) != new_key:
        stop_stack(proc)
        raise AssertionError(f"expected {'a' if new_key else 'no'} new key:\n{printed}")
    return Stack(proc, home, url, match.group(1) if match else "", log_path)


def _spawn_stack(
    home: Path, workers: int, extra_env: dict[str, str] | None, args: Sequence[str]
) -> tuple[subprocess.Popen[bytes], str]:
    """``soong-agent up`` on a free port, its output appended to ``home/up.log``."""
    port = find_free_port()
    env = {
        **os.environ,
        "SOONG_AGENT_HOME": str(home),
        "SOONG_GATEWAY_PORT": str(port),
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    env.pop("SOONG_REDIS_URL", None)
    with (home / "up.log").open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_core.cli", "up", "--workers", str(workers), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
    return proc, f"http://127.0.0.1:{port}"


def _is_gateway(url: str) -> bool:
    """Whether the /readyz at ``url`` is the gateway's (it names the backend services; a
    service's ops port answers /readyz too, without them)."""
    try:
        body = httpx.get(f"{url}/readyz", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return False
    return isinstance(body, dict) and "services" in body


def stop_stack(proc: subprocess.Popen[bytes], sig: int = signal.SIGINT) -> int:
    """Signal the stack and wait for it; SIGKILL the group if it hangs (then the test fails)."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            return proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise AssertionError("stack did not stop within 45 s") from None
    return proc.returncode


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The whole stack, shared by the end-to-end tests of one run."""
    running = start_stack(
        tmp_path_factory.mktemp("stack-home"), extra_env={"SOONG_MODEL_PROVIDER": "fake"}
    )
    yield running
    stop_stack(running.process)


def run_one_message(gateway_url: str, api_key: str) -> tuple[str, str, list[str]]:
    """A new session, one message, its run's event stream read to the end: the session id, the
    run id and the stream's ``event:`` lines."""
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=gateway_url, headers=headers, timeout=30) as client:
        session = client.post("/v1/sessions", json={}).json()["session_id"]
        posted = client.post(f"/v1/sessions/{session}/messages", json={"text": "hi"})
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["run_id"]
        with client.stream("GET", f"/v1/sessions/{session}/runs/{run_id}/events") as events:
            kinds = [line for line in events.iter_lines() if line.startswith("event:")]
    return session, run_id, kinds
