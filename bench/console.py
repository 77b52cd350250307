"""What serving the web console costs the API path: the gateway with the console on and off.

Two stacks run side by side with the scripted model, identical but for ``gateway.console``.
The API path is measured on each alternately, ``ROUNDS`` times (this machine's speed drifts by
tens of percent within an hour, so only comparisons made in one sitting, interleaved, count):

- ``GET /v1/sessions/{id}`` requests/s with 50 concurrent keep-alive connections for
  ``RPS_SECONDS`` (the load generator of ``bench/gateway.py``);
- the latency of one such GET at a time (``SERIAL`` of them, median).

Then, on the stack with the console, a session of 2,500 nodes in the browser (headless
Chromium, ``helpers/console_browser.py``): ``chat_open_ms_2500``, ``tree_open_ms_2500`` and
``send_to_first_delta_ms_2500`` (median of ``BROWSER_ROUNDS``; goal: ≤ 300 ms each), and the
two reads those views start with, through the gateway alone (no browser): ``path_ms_2500`` and
``tree_ms_2500``, the median of ``READS`` ``GET /v1/sessions/{id}/path`` (the active path, full
nodes) and ``…/tree`` of another session of 2,500 nodes.

Printed last, one JSON line: ``console_get_rps_on`` / ``_off`` (median round),
``console_rps_ratio`` (on / off; goal: 1 within noise, ≥ 0.95), ``console_get_p50_ms_on`` /
``_off``, ``rounds``, and the three browser figures. Before measuring it checks that
``/console/`` is served by the one stack and answers 404 on the other. ``--browser-only`` runs
the browser figures alone (one stack), for a quick look; ``--reads-only`` the two reads alone.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "shared"), str(ROOT / "bench")]

import httpx  # noqa: E402
from helpers.console_browser import browser_figures  # noqa: E402
from helpers.homes import stack_home  # noqa: E402
from helpers.http_load import get_rps  # noqa: E402

from tests.conftest import Stack, start_stack, stop_stack  # noqa: E402
from tests.e2e.console.big import big_session  # noqa: E402

ROUNDS = 4
RPS_SECONDS = 3.0
SERIAL = 300
BROWSER_ROUNDS = 3
READS = 9
READ_NODES = 2500
CONFIG = """
[gateway]
rate_limit_per_s = 1000000.0
rate_limit_burst = 1000000
console = {console}
"""


def _start(console: bool) -> Stack:
    home = stack_home(f"bench-console-{'on' if console else 'off'}-")
    (home / "config.toml").write_text(CONFIG.format(console=str(console).lower()))
    return start_stack(home, workers=1, extra_env={"SOONG_MODEL_PROVIDER": "fake"})


async def _prepare(stack: Stack, console: bool) -> str:
    """A session to read; checks the console is served exactly when configured."""
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    async with httpx.AsyncClient(base_url=stack.gateway_url, headers=headers) as c:
        page = await c.get("/console/")
        assert page.status_code == (200 if console else 404), page.status_code
        return str((await c.post("/v1/sessions", json={})).json()["session_id"])


async def _serial_p50_ms(stack: Stack, path: str) -> float:
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    took = []
    async with httpx.AsyncClient(base_url=stack.gateway_url, headers=headers) as c:
        for _ in range(SERIAL):
            started = time.perf_counter()
            assert (await c.get(path)).status_code == 200
            took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


def read_figures(stack: Stack, nodes: int = READ_NODES) -> dict[str, float]:
    """``path_ms_<nodes>`` and ``tree_ms_<nodes>``: median ms of ``READS`` reads, alternated, of
    a fresh session of ``nodes`` nodes (one warm-up read each first, not counted)."""
    sid = big_session(stack, nodes, title="bench reads")
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    took: dict[str, list[float]] = {"path": [], "tree": []}
    with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=60) as c:
        for i in range(READS + 1):
            for kind in took:
                started = time.perf_counter()
                answer = c.get(f"/v1/sessions/{sid}/{kind}")
                ms = (time.perf_counter() - started) * 1000
                assert answer.status_code == 200, answer.text
                listed = answer.json()["items" if kind == "path" else "nodes"]
                assert len(listed) == nodes, len(listed)
                if i:
                    took[kind].append(ms)
    return {f"{k}_ms_{nodes}": round(statistics.median(v), 1) for k, v in took.items()}


def main() -> int:
    """Run the comparison and print the figures."""
    if "--reads-only" in sys.argv[1:]:
        stack = _start(True)
        try:
            print(json.dumps(read_figures(stack)))
        finally:
            stop_stack(stack.process)
        return 0
    if "--browser-only" in sys.argv[1:]:
        stack = _start(True)
        try:
            print(
                json.dumps({**read_figures(stack), **browser_figures(stack, rounds=BROWSER_ROUNDS)})
            )
        finally:
            stop_stack(stack.process)
        return 0
    stacks = {True: _start(True), False: _start(False)}
    browser: dict[str, float] = {}
    try:
        paths = {
            on: f"/v1/sessions/{asyncio.run(_prepare(stack, on))}" for on, stack in stacks.items()
        }
        rps: dict[bool, list[float]] = {True: [], False: []}
        p50: dict[bool, list[float]] = {True: [], False: []}
        for round_ in range(ROUNDS):
            for on in (True, False) if round_ % 2 == 0 else (False, True):
                stack = stacks[on]
                rps[on].append(
                    asyncio.run(
                        get_rps(stack.gateway_url, paths[on], stack.api_key, 50, RPS_SECONDS)
                    )
                )
                p50[on].append(asyncio.run(_serial_p50_ms(stack, paths[on])))
        browser = {
            **read_figures(stacks[True]),
            **browser_figures(stacks[True], rounds=BROWSER_ROUNDS),
        }
    finally:
        for stack in stacks.values():
            stop_stack(stack.process)
    on_rps, off_rps = statistics.median(rps[True]), statistics.median(rps[False])
    print(f"rounds: on {rps[True]} off {rps[False]}", file=sys.stderr)
    result = {
        "console_get_rps_on": round(on_rps, 1),
        "console_get_rps_off": round(off_rps, 1),
        "console_rps_ratio": round(on_rps / off_rps, 3),
        "console_get_p50_ms_on": round(statistics.median(p50[True]), 3),
        "console_get_p50_ms_off": round(statistics.median(p50[False]), 3),
        "rounds": ROUNDS,
        **browser,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
