"""A service's ops port: liveness at once, readiness only when its subscribers run, its metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_core.bus import BusNames, Delivery
from agent_core.bus.broker import make_broker  # publishes as another FastStream app would
from agent_core.bus.contracts.runs import RUNS_MESSAGE, RunNudge
from agent_core.config import load_settings
from agent_core.errors import ConfigError
from agent_core.service import ServiceContext, ServiceParts, run_service
from agent_core.service.valkey import find_free_port
from tests.integration.bus.helpers import wait_for


async def _status(url: str) -> int | None:
    try:
        async with httpx.AsyncClient(timeout=2) as client:
            return (await client.get(url)).status_code
    except httpx.HTTPError:
        return None


async def test_health_readiness_and_pending_on_the_ops_port(
    redis_url: str, names: BusNames, tmp_path: Path
) -> None:
    port = find_free_port()
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(tmp_path),
            "SOONG_REDIS_URL": redis_url,
            "SOONG_NAMESPACE": names.namespace,
            "SOONG_OPS_PORT": str(port),
        }
    )
    gate, handled, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def hold(message: Any, _: Delivery) -> None:
        handled.set()
        await release.wait()

    async def factory(ctx: ServiceContext) -> ServiceParts:
        return ServiceParts(
            consumers=[ctx.consumer(names.runs, "workers", RUNS_MESSAGE, handler=hold)],
            on_start=[gate.wait],
        )

    stop = asyncio.Event()
    service = asyncio.create_task(
        run_service(factory, settings, "opsy", "0", stop=stop, configure_logging=False)
    )
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_for(lambda: _is(base + "/healthz", 200))
        assert await _status(base + "/readyz") == 503  # alive, not ready: still starting
        gate.set()
        await wait_for(lambda: _is(base + "/readyz", 200))
        broker = make_broker(redis_url)
        await broker.connect()
        await broker.publish(RunNudge(session_id="s"), stream=names.runs)
        await broker.stop()
        async with asyncio.timeout(20):
            await handled.wait()
        async with httpx.AsyncClient(timeout=5) as client:
            text = (await client.get(base + "/metrics")).text
            assert f'soong_bus_pending{{group="workers",stream="{names.runs}"}} 1.0' in text
            assert (await client.get(base + "/nope")).status_code == 404
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\x00garbage\r\n\r\n")
        assert (await reader.read()).startswith(b"HTTP/1.1 400")
        writer.close()
        # A second process on the same ops port says which port, and does not start.
        with pytest.raises(ConfigError, match=f"ops port 127.0.0.1:{port}"):
            await run_service(factory, settings, "opsy", "1", configure_logging=False)
    finally:
        release.set()
        stop.set()
        async with asyncio.timeout(30):
            assert await service == 0
    assert await _status(base + "/healthz") is None  # the port is closed with the service


async def _is(url: str, status: int) -> bool:
    return await _status(url) == status
