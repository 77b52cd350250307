"""Shared pieces of the console's daily-use tests (keyboard, layout, accessibility, children,
big sessions): a stack whose model also dispatches workers, the axe-core run, keyboard walking.

The model is the console tests' (``model.py``) plus ``team …``: the run dispatches two workers,
``alpha`` and ``beta``, each answering slowly enough to be seen live, then answers
``Both workers are done.``
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, sync_playwright

from tests.conftest import start_stack, stop_stack
from tests.e2e.console.conftest import CHROMIUM, CONFIG, ConsoleStack
from tests.e2e.console.model import console_model
from tests.fakes.script import ScriptedResponse
from tests.integration.run_worker.harness import (
    fake_server,
    last_role,
    last_user_text,
    text_answer,
    tool_calls_turn,
)

ROOT = Path(__file__).resolve().parents[3]
AXE_SCRIPT = ROOT / ".tools" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
TEAM_ANSWER = "Both workers are done."


def daily_model(request: Any) -> ScriptedResponse:
    """``team …`` dispatches workers alpha and beta; anything else is ``console_model``'s."""
    first_user = next((m for m in request["messages"] if m["role"] == "user"), None)
    if first_user is not None and "TASK" in str(first_user["content"]):  # a worker
        return text_answer(f"done: {last_user_text(request)}", delay_s=0.15, pieces=8)
    if last_user_text(request).strip().lower().startswith("team"):
        if last_role(request) == "tool":
            return text_answer(TEAM_ANSWER)
        tail = secrets.token_hex(4)
        return tool_calls_turn(
            (f"call_a_{tail}", "dispatch_worker", {"worker": "alpha", "task": "TASK one"}),
            (f"call_b_{tail}", "dispatch_worker", {"worker": "beta", "task": "TASK two"}),
        )
    return console_model(request)


@contextmanager
def running_console(
    tmp_path_factory: pytest.TempPathFactory,
    model: Callable[[Any], ScriptedResponse] = daily_model,
    workers: int = 1,
) -> Iterator[ConsoleStack]:
    """A stack whose model is ``model``, and Playwright started (conftest's ``console`` launches
    a browser per module from it)."""
    assert shutil.which(CHROMIUM) or Path(CHROMIUM).exists(), (
        f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does it)"
    )
    home: Path = tmp_path_factory.mktemp("console-daily-home")
    (home / "config.toml").write_text(CONFIG)
    fake = fake_server(model)
    env = {
        "SOONG_MODEL_PROVIDER": "openai",
        "SOONG_MODEL_NAME": "fake-model",
        "SOONG_MODEL_BASE_URL": fake.sdk_base_url,
        "OPENAI_API_KEY": "sk-test-not-a-real-key-000000",
    }
    stack = start_stack(home, workers=workers, extra_env=env)
    try:
        with sync_playwright() as pw:
            yield ConsoleStack(stack, fake, pw)
    finally:
        stop_stack(stack.process)
        fake.stop_thread()


def axe_violations(page: Page, *, include: str | None = None) -> list[dict[str, Any]]:
    """The serious and critical violations axe-core finds on the page as it is now (each as
    ``{id, impact, help, targets}``). axe-core comes from npm (``make axe``)."""
    assert AXE_SCRIPT.exists(), f"{AXE_SCRIPT} is missing: run `make axe` (make test does)"
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # Served as if from the console's own origin (its CSP allows 'self' scripts only, and
        # stays on): the browser fetches it, the test answers with the npm package's file.
        url = page.evaluate("location.origin") + "/console/__test__/axe.min.js"
        page.route(url, lambda route: route.fulfill(path=str(AXE_SCRIPT)))
        page.add_script_tag(url=url)
    found = page.evaluate(
        """async (include) => {
          const result = await axe.run(include ? document.querySelector(include) : document,
            { resultTypes: ['violations'] });
          return result.violations
            .filter((v) => v.impact === 'serious' || v.impact === 'critical')
            .map((v) => ({ id: v.id, impact: v.impact, help: v.help,
                           targets: v.nodes.map((n) => n.target.join(' ')).slice(0, 5) }));
        }""",
        include,
    )
    return list(found)


def focused(page: Page) -> dict[str, Any]:
    """What has the keyboard's focus: its tag, text, label and data attributes."""
    return dict(
        page.evaluate(
            """() => { const e = document.activeElement;
              return { tag: e?.tagName, text: (e?.innerText || '').trim().slice(0, 120),
                       label: e?.getAttribute('aria-label'), role: e?.getAttribute('role'),
                       data: { ...(e?.dataset || {}) } }; }"""
        )
    )


def focus_becomes(
    page: Page, test: Callable[[dict[str, Any]], bool], what: str, timeout_s: float = 10.0
) -> dict[str, Any]:
    """Wait until what has the focus passes ``test``: a key that opens a form or closes a panel
    moves the focus in an effect, after the next paint, not by the time the key press returns."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = focused(page)
        if test(now):
            return now
        if time.monotonic() > deadline:
            raise AssertionError(f"the focus never reached {what}: it is on {now}")
        page.wait_for_timeout(20)


def tab_until(
    page: Page, matches: Callable[[dict[str, Any]], bool], *, back: bool = False, limit: int = 60
) -> dict[str, Any]:
    """Press Tab (Shift+Tab with ``back``) until the focused element ``matches``; it."""
    key = "Shift+Tab" if back else "Tab"
    for _ in range(limit):
        page.keyboard.press(key)
        now = focused(page)
        if matches(now):
            return now
    raise AssertionError(f"{key} never reached it; focus is on {json.dumps(focused(page))}")
