"""The console's big-session figures, measured in the browser (Debian's Chromium, headless):
a session of ``nodes`` nodes (seeded through the storage writer, ``tests/e2e/console/big.py``),
and for each of ``rounds`` rounds, with ``performance.now()`` in the page:

- ``chat_open_ms_<nodes>``: from the route change to the chat until its newest message is in the
  page;
- ``tree_open_ms_<nodes>``: from the Tree tab's route until the active node's row is;
- ``send_to_first_delta_ms_<nodes>``: from pressing Send until the first streamed text shows.

Each figure is the median of its rounds (goal: ≤ 300 ms each at 2,500 nodes).
"""

from __future__ import annotations

import statistics
from typing import Any

from playwright.sync_api import Page, ViewportSize, expect, sync_playwright

from tests.conftest import Stack
from tests.e2e.console.big import big_session
from tests.e2e.console.conftest import CHROMIUM, CHROMIUM_ARGS, VIEWPORT

# Resolves with the time at which `test()` first holds, checked once per frame.
_UNTIL = """(test) => new Promise((resolve) => {
  const step = () => (test() ? resolve(performance.now()) : requestAnimationFrame(step));
  step();
})"""

_OPEN = f"""async ([hash, selector]) => {{
  const until = {_UNTIL};
  const started = performance.now();
  location.hash = hash;
  return (await until(() => document.querySelector(selector))) - started;
}}"""

_SEND = f"""async (text) => {{
  const until = {_UNTIL};
  const box = document.querySelector('textarea[aria-label="Message"]');
  box.value = text;
  box.dispatchEvent(new Event('input', {{ bubbles: true }}));
  const button = document.querySelector('.composer button[type="submit"]');
  await until(() => !button.disabled);
  const before = document.querySelectorAll('[data-live-run]').length;
  const started = performance.now();
  button.click();
  const seen = await until(() => document.querySelectorAll('[data-live-run]').length > before
    && [...document.querySelectorAll('[data-live-text]')].some((e) => e.textContent.length > 0));
  return seen - started;
}}"""


def _settled(page: Page) -> None:
    """No run in flight on the page (no wait_for_function: the console's CSP forbids eval)."""
    expect(page.locator("[data-live-run]")).to_have_count(0, timeout=60_000)


def browser_figures(stack: Stack, *, nodes: int = 2500, rounds: int = 3) -> dict[str, Any]:
    """The three figures for a fresh session of ``nodes`` nodes on ``stack`` (see the module)."""
    sid = big_session(stack, nodes, title="bench")
    chat = f"#/s/{sid}/chat"
    newest = ".conversation .msg.assistant:last-of-type"
    taken: dict[str, list[float]] = {"chat": [], "tree": [], "send": []}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            size: ViewportSize = {"width": VIEWPORT["width"], "height": VIEWPORT["height"]}
            page = browser.new_context(viewport=size).new_page()
            page.set_default_timeout(60_000)
            page.goto(f"{stack.gateway_url}/console/")
            page.get_by_label("API key").fill(stack.api_key)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_role("button", name="New session").wait_for()
            for i in range(rounds):
                page.evaluate("location.hash = '#/'")
                page.locator(".home").wait_for()
                taken["chat"].append(page.evaluate(_OPEN, [chat, newest]))
                taken["tree"].append(
                    page.evaluate(
                        _OPEN, [f"#/s/{sid}/tree", "button.tree-row[aria-current='true']"]
                    )
                )
                page.evaluate(_OPEN, [chat, newest])
                _settled(page)
                taken["send"].append(page.evaluate(_SEND, f"hello {i}"))
                _settled(page)
        finally:
            browser.close()
    return {
        f"chat_open_ms_{nodes}": round(statistics.median(taken["chat"]), 1),
        f"tree_open_ms_{nodes}": round(statistics.median(taken["tree"]), 1),
        f"send_to_first_delta_ms_{nodes}": round(statistics.median(taken["send"]), 1),
    }
