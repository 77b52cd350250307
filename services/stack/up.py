"""``soong-agent up``: embedded Valkey plus all five services under the supervisor.

One stack per home: ``up`` first takes the home's lock (:mod:`agent_core.service.homelock`), and a
second ``up`` on the same home stops there, touching nothing of the first. The gateway's port and
the bus are checked before anything starts, so every expected failure is one line and an exit code.

What ``up`` says itself (the banner, readiness, Valkey restarts) goes through :class:`Say`: plain
``soong-agent: …`` lines, or with ``observability.log_format = "json"`` JSON records like the
services' own, so that every line ``up`` prints is JSON then.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx

from agent_core.config import Settings
from agent_core.config.providers import check_model_keys
from agent_core.errors import ConfigError
from agent_core.observability.logs import configure_logging
from agent_core.plugins import plugin_provider_keys
from agent_core.provider import check_provider_key
from agent_core.service.homelock import HomeLock
from agent_core.service.runner import EXIT_CONFIG
from agent_core.service.supervisor import ChildSpec, Supervisor, as_json_line, die_with_parent
from agent_core.service.valkey import (
    UNIX_SOCKET_PATH_MAX,
    EmbeddedValkey,
    find_free_port,
    home_password,
    write_private,
)
from services.stack.stackfile import STACK_FILE

__all__ = ["STACK_FILE", "run_stack"]


class Say:
    """``up``'s own announcements: ``soong-agent: <message>`` lines, or JSON records."""

    def __init__(self, json_lines: bool) -> None:
        self.json_lines = json_lines

    def __call__(self, message: str, *, plain: str | None = None, level: str = "INFO") -> None:
        """Print ``message`` (``plain`` instead in text mode, when given)."""
        if self.json_lines:
            sys.stdout.buffer.write(as_json_line("up", message, level))
            sys.stdout.buffer.flush()
        else:
            print(plain if plain is not None else f"soong-agent: {message}", flush=True)


_VALKEY_POLL_S = 0.1  # how soon a dead embedded Valkey is noticed

# Stop order: front doors first, the storage-writer last so that every write in flight lands.
_ORDER = {"gateway": 0, "run_worker": 1, "memory_extraction": 2, "task_wal": 2, "storage_writer": 3}


def _children(
    env: dict[str, str], workers: int, host: str, gateway_port: int
) -> tuple[list[ChildSpec], dict[str, str]]:
    """The supervised processes, each with an ops port of its own: distinct, and never the
    gateway's (which nobody has bound yet: a port just released may be handed out again)."""
    specs: list[ChildSpec] = []
    ops: dict[str, str] = {}
    promised = {gateway_port}

    def spec(name: str, instance: str) -> None:
        argv = [sys.executable, "-m", "agent_core.cli", "serve", name, "--instance", instance]
        label = name if name != "run_worker" else f"run_worker.{instance}"
        child_env = dict(env)
        port = find_free_port(host, exclude=promised)
        promised.add(port)
        child_env["SOONG_OPS_PORT"] = str(port)
        ops[label] = f"http://{host}:{port}"
        specs.append(ChildSpec(label, argv, child_env, _ORDER[name]))

    for name in ("storage_writer", "task_wal", "memory_extraction"):
        spec(name, "0")
    # A warm standby writer: the same consumer and ops port, waiting for the database's lock.
    # Whichever of the two holds the lock writes; when it dies the other takes over at once (and
    # re-applies what the dead one had read and not acknowledged), while the supervisor restarts
    # the dead one as the new standby. A writer restart costs no process start-up.
    # Which of the two is active is decided by the lock, not here: they are labelled as copies
    # (each writer logs whether it holds the database or waits for it).
    writer = specs[0]
    writer.name = "storage_writer.1"
    writer.env = {**writer.env, "SOONG_WRITER_STANDBY": "1"}
    specs.append(ChildSpec("storage_writer.2", writer.argv, writer.env, writer.stop_order))
    for i in range(workers):
        spec("run_worker", str(i))
    spec("gateway", "0")
    return specs, ops


async def _announce_ready(url: str, stop: asyncio.Event, say: Say) -> None:
    async with httpx.AsyncClient(timeout=3) as client:
        while not stop.is_set():
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{url}/readyz")).status_code == 200:
                    say(f"ready at {url}", plain=f"soong-agent is ready at {url}")
                    return
            await asyncio.sleep(0.25)


async def _keep_valkey(valkey: EmbeddedValkey, stop: asyncio.Event, say: Say) -> None:
    """Restart the embedded Valkey whenever it dies, on its port and with its data (its AOF),
    until ``stop``. Services see the bus down meanwhile (503 with Retry-After) and reconnect."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_VALKEY_POLL_S):
                await stop.wait()
        process = valkey.process
        if stop.is_set() or process is None or process.poll() is None:
            continue
        say(f"valkey exited with {process.returncode}; restarting", level="WARNING")
        try:
            valkey.spawn()  # here, not in a worker thread: PDEATHSIG follows the spawning thread
            await asyncio.to_thread(valkey.wait_ready, 10.0)
        except ConfigError as exc:  # its port taken meanwhile, its data unreadable: try again
            say(f"valkey did not restart: {exc.message}", level="ERROR")
        else:
            say("valkey restarted")


async def _supervise(
    children: list[ChildSpec], gateway_url: str, valkey: EmbeddedValkey | None, say: Say
) -> str | None:
    """Run the children until a signal; the child whose configuration stopped the stack, if any."""
    supervisor = Supervisor(children, json_lines=say.json_lines)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, supervisor.stop)
    stop = asyncio.Event()
    helpers = [asyncio.create_task(_announce_ready(gateway_url, stop, say))]
    if valkey is not None:
        helpers.append(asyncio.create_task(_keep_valkey(valkey, stop, say)))
    try:
        await supervisor.run()
    finally:
        stop.set()
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
    return supervisor.config_error


def local_socket(home: Path) -> Path | None:
    """Where the embedded Valkey of ``home`` listens for this host's processes: a unix socket in
    its data folder, or ``None`` (TCP alone) when that path is too long for a socket's name."""
    path = home.resolve() / "redis" / "valkey.sock"
    return path if len(os.fsencode(path)) <= UNIX_SOCKET_PATH_MAX else None


def _check_port_free(what: str, host: str, port: int) -> None:
    """Raise ``ConfigError("port_in_use")`` naming ``what`` when ``host:port`` is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                "port_in_use",
                f"the {what} port {host}:{port} is in use ({exc.strerror}); "
                f"free it or choose another (SOONG_GATEWAY_PORT)",
                details={"key": "gateway.port", "port": port},
            ) from None


def run_stack(
    settings: Settings, *, workers: int | None, fake_provider: bool, new_dev_key: bool = False
) -> int:
    """Run the whole stack in the foreground until SIGINT/SIGTERM; return the exit code.

    Raises :class:`ConfigError` (nothing started, nothing of another stack touched) when the home
    is in use, the gateway's port is taken or the configured Redis does not answer.
    """
    die_with_parent()  # if whoever started us (make, a shell) dies, shut down rather than linger
    # A provider no worker can build stops start-up here, before anything runs (whether it can
    # be built is the run-workers' check: they exit with EXIT_CONFIG, which stops the stack).
    plugins = plugin_provider_keys(settings)
    check_provider_key(settings.model.provider if not fake_provider else "fake", plugins)
    for named in settings.providers.values():
        check_provider_key(named.kind, plugins)
    # A hosted provider without its key could only fail every run: say which variable, now.
    check_model_keys(settings, os.environ, default_model=not fake_provider)
    home = settings.home
    lock = HomeLock(home)
    lock.acquire()
    try:
        return _run_locked(settings, workers, fake_provider, new_dev_key)
    finally:
        lock.release()


def _run_locked(settings: Settings, workers: int | None, fake_provider: bool, new_key: bool) -> int:
    home = settings.home
    json_lines = settings.observability.log_format == "json"
    say = Say(json_lines)
    # The supervisor's own records (a child restarted, a configuration error) on standard
    # output with the children's, in the same format.
    configure_logging(
        settings.log_level, "up", "0", settings.observability.log_format, stream=sys.stdout
    )
    host = settings.gateway.host
    port = settings.gateway.port or find_free_port(host)
    _check_port_free("gateway", host, port)
    valkey: EmbeddedValkey | None = None
    url = settings.bus.redis_url
    stack_file = home / STACK_FILE
    try:
        if url is None:
            # A password per home: code the agents run is walled off from the bus already, but
            # no local process should reach the bus by knowing only its port.
            valkey = EmbeddedValkey(
                home / "redis",
                appendonly=True,
                password=home_password(home),
                unix_socket=local_socket(home),
            )
            valkey.start()
            url = valkey.url
        gateway_url = f"http://{host}:{port}"
        env = {
            # The services reach the embedded Valkey by its unix socket when it has one (less
            # CPU a call than loopback TCP); run/stack.json names its TCP address for clients.
            "SOONG_REDIS_URL": url if valkey is None else valkey.local_url,
            "SOONG_AGENT_HOME": str(home),
            "SOONG_GATEWAY_PORT": str(port),
        }
        if fake_provider:
            env["SOONG_MODEL_PROVIDER"] = "fake"
        from services.gateway.devkey import dev_key  # the key store is the gateway's

        announced = asyncio.run(
            dev_key(url, settings.bus.namespace, home, reissue=new_key, bus=settings.bus)
        )
        children, ops = _children(
            env, workers if workers is not None else settings.run_worker.count, host, port
        )
        # The URL carries the password: the file is its owner's alone.
        write_private(
            stack_file,
            json.dumps(
                {"redis_url": url, "gateway_url": gateway_url, "pid": os.getpid(), "ops": ops}
            ),
        )
        say(f"gateway {gateway_url}  (docs: {gateway_url}/docs)")
        for line in announced.splitlines():
            say(line)
        if fake_provider:
            say("DEMO MODE — answers come from a scripted demo model: send it 'help'")
        started = time.monotonic()
        failed = asyncio.run(_supervise(children, gateway_url, valkey, say))
        say(f"stopped after {time.monotonic() - started:.0f}s")
        if failed is not None:
            say(f"{failed} could not start: configuration error", level="ERROR")
            return EXIT_CONFIG
        return 0
    finally:
        if valkey is not None:
            valkey.stop()
        with contextlib.suppress(FileNotFoundError):
            stack_file.unlink()
