"""Local mode: ``async with soong_agent.local() as client`` runs a whole stack for the block.

It starts the same ``soong-agent up`` a person would (embedded Valkey and every service, under
the supervisor) as a child process with its own home — a temporary folder removed afterwards, or
the one given, kept — on a free loopback port, waits until ``/readyz`` says ready, and yields an
:class:`AsyncClient` with the development key the stack printed. Leaving the block stops the
stack in order (SIGINT, as Ctrl-C would) and waits for it; a stack that does not stop in time is
killed with its whole process group, so nothing is left running either way.

A given home that already has its development key (``up`` prints that key only when it makes it)
gets a key of its own for the block: made with ``soong-agent keys create`` once the stack is
ready, expiring after a day even if the block never ends, and revoked when it ends. The home's
development key is left as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from agent_core.service.valkey import find_free_port
from soong_agent._client import AsyncClient
from soong_agent._errors import SoongError

__all__ = ["LocalClient", "LocalStackError", "local"]

_KEY = re.compile(r"API key for account '[^']+': (\S+)")
_REUSED = "soong-agent: development key "  # ``up`` reuses the home's key and does not print it
_BLOCK_ACCOUNT = "dev"  # the account of ``up``'s development key
_BLOCK_KEY_EXPIRES = "1d"
_CREATED = re.compile(r"^key id:\s+(\S+)$.*^key:\s+(\S+)$", re.M | re.S)
_POLL_S = 0.2
_STOP_TIMEOUT_S = 45.0


class LocalStackError(SoongError):
    """The local stack did not start (its log is in ``log``)."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(f"{message}\n--- soong-agent up log (last lines) ---\n{log[-4000:]}")
        self.log = log


class LocalClient(AsyncClient):
    """The client :func:`local` yields: an :class:`AsyncClient` that also knows its stack —
    ``home``, the ``soong-agent up`` process's ``pid``, and its ``api_key`` (the development key
    when the stack made it, else the block's own key)."""

    def __init__(self, url: str, key: str, *, home: Path, pid: int, **options: Any) -> None:
        super().__init__(url, key, **options)
        self.api_key = key
        self.home = home
        self.pid = pid


@contextlib.asynccontextmanager
async def local(
    home: str | Path | None = None,
    *,
    workers: int = 1,
    fake_provider: bool = False,
    config: str | None = None,
    env: Mapping[str, str] | None = None,
    startup_timeout_s: float = 90.0,
    **client_options: Any,
) -> AsyncIterator[LocalClient]:
    """Run ``soong-agent up`` for the block and yield a client of it.

    ``home`` is the stack's ``SOONG_AGENT_HOME`` (default: a temporary folder, removed after);
    ``fake_provider`` answers with the scripted demo model instead of a real provider;
    ``config`` is written as the home's ``config.toml``; ``env`` adds environment variables
    (``SOONG_MODEL_PROVIDER``, a provider key, …). The stack's output goes to ``<home>/up.log``.
    """
    temporary = home is None
    root = Path(tempfile.mkdtemp(prefix="soong-agent-")) if home is None else Path(home)
    root.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (root / "config.toml").write_text(config)
    proc: subprocess.Popen[bytes] | None = None
    block_key_id: str | None = None
    try:
        proc, url, child_env = _start(root, workers=workers, fake_provider=fake_provider, env=env)
        key = await _wait_ready(proc, url, root / "up.log", startup_timeout_s)
        if key is None:
            block_key_id, key = await _block_key(child_env)
        async with LocalClient(url, key, home=root, pid=proc.pid, **client_options) as client:
            yield client
    finally:
        if block_key_id is not None and proc is not None and proc.poll() is None:
            with contextlib.suppress(LocalStackError):  # it expires by itself anyway
                await _keys(child_env, "revoke", block_key_id)
        if proc is not None:
            await asyncio.to_thread(_stop, proc)
        if temporary:
            shutil.rmtree(root, ignore_errors=True)


def _start(
    home: Path, *, workers: int, fake_provider: bool, env: Mapping[str, str] | None
) -> tuple[subprocess.Popen[bytes], str, dict[str, str]]:
    """The ``up`` process, its gateway URL and its environment (the CLI's, for ``keys``)."""
    port = find_free_port()
    child_env = {
        **os.environ,
        "SOONG_AGENT_HOME": str(home),
        "SOONG_GATEWAY_HOST": "127.0.0.1",
        "SOONG_GATEWAY_PORT": str(port),
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    child_env.pop("SOONG_REDIS_URL", None)  # the stack's own embedded Valkey, in its home
    argv = [sys.executable, "-m", "agent_core.cli", "up", "--workers", str(workers)]
    if fake_provider:
        argv.append("--fake-provider")
    with (home / "up.log").open("wb") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env,
            start_new_session=True,  # its own process group: stopped (or killed) as a whole
        )
    return proc, f"http://127.0.0.1:{port}", child_env


async def _wait_ready(
    proc: subprocess.Popen[bytes], url: str, log: Path, timeout_s: float
) -> str | None:
    """Once ``/readyz`` answered 200: the development key the stack printed, or ``None`` when
    it reused the home's (announced before the services start, so it is in the log by then)."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=2) as probe:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LocalStackError(f"soong-agent up exited with {proc.returncode}", _text(log))
            with contextlib.suppress(httpx.HTTPError):
                if (await probe.get(f"{url}/readyz")).status_code == 200:
                    printed = _text(log)
                    match = _KEY.search(printed)
                    if match is not None:
                        return match.group(1)
                    if _REUSED in printed:
                        return None
            await asyncio.sleep(_POLL_S)
    raise LocalStackError(f"the stack was not ready within {timeout_s:.0f} s", _text(log))


async def _block_key(env: Mapping[str, str]) -> tuple[str, str]:
    """``(key id, key)`` of a new key of the development account, for this block only."""
    out = await _keys(
        env, "create", "--account", _BLOCK_ACCOUNT, "--expires-in", _BLOCK_KEY_EXPIRES
    )
    match = _CREATED.search(out)
    if match is None:
        raise LocalStackError("soong-agent keys create printed no key", out)
    return match.group(1), match.group(2)


async def _keys(env: Mapping[str, str], *args: str) -> str:
    """Run ``soong-agent keys ARGS`` against the stack (found through the home's stack file)."""
    cli = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_core.cli",
        "keys",
        *args,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out, _ = await cli.communicate()
    text = out.decode(errors="replace")
    if cli.returncode != 0:
        raise LocalStackError(f"soong-agent keys {args[0]} exited with {cli.returncode}", text)
    return text


def _text(log: Path) -> str:
    try:
        return log.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the stack as Ctrl-C would; kill its process group if it hangs."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=_STOP_TIMEOUT_S)
    # Whatever is left of its group (a child that did not stop in time) goes too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
