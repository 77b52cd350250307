"""A minimal keep-alive HTTP/1.1 load generator for GETs (httpx itself saturated a core at ~300
requests/s here, so the load generator would be measured instead of the server)."""

from __future__ import annotations

import asyncio
import time

import httpx

__all__ = ["get_rps"]


async def _get_loop(host: str, port: int, request: bytes, deadline: float) -> int:
    """GETs on one keep-alive connection until ``deadline``; how many were answered 200."""
    reader, writer = await asyncio.open_connection(host, port)
    count = 0
    try:
        while time.perf_counter() < deadline:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head[:200]
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            count += 1
    finally:
        writer.close()
    return count


async def get_rps(url: str, path: str, key: str, clients: int, seconds: float) -> float:
    """``GET path`` requests/s answered with ``clients`` concurrent keep-alive connections for
    ``seconds`` (after 100 warm-up requests)."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as c:
        for _ in range(100):
            assert (await c.get(path)).status_code == 200
    parsed = httpx.URL(url)
    host, port = parsed.host, parsed.port or 80
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {key}\r\n"
        "Accept: application/json\r\n\r\n"
    ).encode()
    started = time.perf_counter()
    deadline = started + seconds
    counts = await asyncio.gather(
        *(_get_loop(host, port, request, deadline) for _ in range(clients))
    )
    return sum(counts) / (time.perf_counter() - started)
