"""``soong-agent up``: embedded Valkey plus all five services under the supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import httpx

from agent_core.bus import BusNames, make_redis
from agent_core.config import Settings
from agent_core.errors import ConfigError
from agent_core.service.supervisor import ChildSpec, Supervisor, die_with_parent
from agent_core.service.valkey import EmbeddedValkey, find_free_port

__all__ = ["STACK_FILE", "run_stack"]

STACK_FILE = Path("run/stack.json")
_DEV_ACCOUNT = "dev"

# Stop order: front doors first, the storage-writer last so that every write in flight lands.
_ORDER = {"gateway": 0, "run_worker": 1, "memory_extraction": 2, "task_wal": 2, "storage_writer": 3}


def _children(settings: Settings, env: dict[str, str], workers: int) -> list[ChildSpec]:
    def spec(name: str, instance: str) -> ChildSpec:
        argv = [sys.executable, "-m", "agent_core.cli", "serve", name, "--instance", instance]
        label = name if name != "run_worker" else f"run_worker.{instance}"
        return ChildSpec(label, argv, env, _ORDER[name])

    specs = [spec("storage_writer", "0"), spec("task_wal", "0"), spec("memory_extraction", "0")]
    specs += [spec("run_worker", str(i)) for i in range(workers)]
    specs.append(spec("gateway", "0"))
    return specs


async def _dev_key(url: str, namespace: str) -> str:
    from services.gateway.keys import ApiKeyStore

    redis = make_redis(url)
    try:
        key, _ = await ApiKeyStore(redis, BusNames(namespace)).create(_DEV_ACCOUNT)
        return key
    finally:
        await redis.aclose()


async def _announce_ready(url: str, stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(timeout=3) as client:
        while not stop.is_set():
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{url}/readyz")).status_code == 200:
                    print(f"soong-agent is ready at {url}", flush=True)
                    return
            await asyncio.sleep(0.25)


async def _supervise(children: list[ChildSpec], gateway_url: str) -> None:
    supervisor = Supervisor(children)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, supervisor.stop)
    stop = asyncio.Event()
    ready = asyncio.create_task(_announce_ready(gateway_url, stop))
    try:
        await supervisor.run()
    finally:
        stop.set()
        ready.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ready


def run_stack(settings: Settings, *, workers: int | None, fake_provider: bool) -> int:
    """Run the whole stack in the foreground until SIGINT/SIGTERM; return the exit code."""
    die_with_parent()  # if whoever started us (make, a shell) dies, shut down rather than linger
    home = settings.home
    home.mkdir(parents=True, exist_ok=True)
    valkey: EmbeddedValkey | None = None
    url = settings.bus.redis_url
    port = settings.gateway.port or find_free_port(settings.gateway.host)
    stack_file = home / STACK_FILE
    try:
        if url is None:
            valkey = EmbeddedValkey(home / "redis", appendonly=True)
            valkey.start()
            url = valkey.url
        gateway_url = f"http://{settings.gateway.host}:{port}"
        env = {
            "SOONG_REDIS_URL": url,
            "SOONG_AGENT_HOME": str(home),
            "SOONG_GATEWAY_PORT": str(port),
        }
        if fake_provider:
            env["SOONG_MODEL_PROVIDER"] = "fake"
        stack_file.parent.mkdir(parents=True, exist_ok=True)
        stack_file.write_text(
            json.dumps({"redis_url": url, "gateway_url": gateway_url, "pid": os.getpid()})
        )
        key = asyncio.run(_dev_key(url, settings.bus.namespace))
        count = workers if workers is not None else settings.run_worker.count
        print(f"soong-agent: gateway {gateway_url}  (docs: {gateway_url}/docs)", flush=True)
        print(f"soong-agent: development API key for account '{_DEV_ACCOUNT}': {key}", flush=True)
        if fake_provider:
            print("soong-agent: DEMO MODE — answers come from a scripted fake model", flush=True)
        started = time.monotonic()
        asyncio.run(_supervise(_children(settings, env, count), gateway_url))
        print(f"soong-agent: stopped after {time.monotonic() - started:.0f}s", flush=True)
        return 0
    except ConfigError:
        raise
    finally:
        if valkey is not None:
            valkey.stop()
        with contextlib.suppress(FileNotFoundError):
            stack_file.unlink()
