"""The console's browser tests: one stack (OpenAI fake as its model) and one headless Chromium
for all of them, a fresh browser context (fresh sessionStorage) per test.

The browser is Debian's ``chromium`` driven by Playwright; Playwright's own browser downloads
are never used (they cannot be reached here). A missing browser fails the tests, it does not
skip them: ``.ci/run`` installs it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Playwright,
    expect,
)

from tests.conftest import Stack
from tests.e2e.gateway.conftest import _create_key
from tests.fakes.openai_server import FakeOpenAIServer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1366, "height": 768}  # a laptop screen
TIMEOUT_MS = 15_000  # a generous bound for a loaded machine; a passing test never waits it out
expect.set_options(timeout=TIMEOUT_MS)
CONFIG = """
[gateway]
rate_limit_per_s = 5000.0
rate_limit_burst = 5000
"""


@dataclass
class Console:
    """The running stack, its fake model, and the browser."""

    stack: Stack
    fake: FakeOpenAIServer
    browser: Browser

    @property
    def url(self) -> str:
        return f"{self.stack.gateway_url}/console/"

    def api(self) -> httpx.Client:
        """An API client of the same account as the console's key."""
        headers = {"Authorization": f"Bearer {self.stack.api_key}"}
        return httpx.Client(base_url=self.stack.gateway_url, headers=headers, timeout=30)


@dataclass
class Tab:
    """One page with everything it logged; ``problems`` must stay empty."""

    page: Page
    context: BrowserContext
    problems: list[str] = field(default_factory=list)


@dataclass
class ConsoleStack:
    """The stack the console modules share, its fake model, and Playwright (started)."""

    stack: Stack
    fake: FakeOpenAIServer
    playwright: Playwright


@pytest.fixture(scope="package")
def console_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleStack]:
    """A stack whose model is the console tests' script (``daily.daily_model``: ``model.py``'s,
    and ``team …``) and two run-workers: one for every console test of a pytest worker
    (``make test`` hands the folder to one worker, tests/conftest.py). Package scope, not
    session: Playwright's event loop runs in this thread while it is started, and the worker's
    asyncio tests after this folder need the thread back."""
    from tests.e2e.console.daily import running_console  # it imports this module

    with running_console(tmp_path_factory, workers=2) as running:
        yield running


@pytest.fixture(scope="module")
def console(console_stack: ConsoleStack) -> Iterator[Console]:
    """The shared stack, signed in as an account of the module's own (what one module's tests
    leave behind for the account, sessions, memory, assistants, is not seen by another's), and a
    headless Chromium of the module's own (a test that takes the network away from its page
    leaves nothing behind in the next module's browser)."""
    stack = console_stack.stack
    redis_url = json.loads((stack.home / "run" / "stack.json").read_text())["redis_url"]
    with ThreadPoolExecutor(1) as thread:  # Playwright's event loop runs in this one
        key = thread.submit(_create_key, redis_url, f"console{secrets.token_hex(4)}").result()
    browser = console_stack.playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield Console(replace(stack, api_key=key), console_stack.fake, browser)
    finally:
        browser.close()


@pytest.fixture
def tab(console: Console) -> Iterator[Tab]:
    """A page in a fresh context; fails the test if the page logged an error or a CSP refusal."""
    context = console.browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    opened = Tab(page, context)

    def on_console(message: ConsoleMessage) -> None:
        # A 4xx the console asked for on purpose is reported by the browser as a failed
        # resource load; anything else at error level is a fault of the page.
        if (
            message.type == "error"
            and "the server responded with a status of 4" not in message.text
        ):
            opened.problems.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: opened.problems.append(f"uncaught: {exc}"))
    try:
        yield opened
    finally:
        context.close()
    assert not opened.problems, opened.problems


def sign_in(tab: Tab, console: Console) -> Page:
    """Open the console and sign in with the stack's key."""
    page = tab.page
    page.goto(console.url)
    page.get_by_label("API key").fill(console.stack.api_key)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="New session").wait_for()
    return page


def new_session(page: Page, title: str, agent_config: dict[str, Any] | None = None) -> str:
    """Create a session through the console's form; its id."""
    page.get_by_role("button", name="New session").click()
    form = page.get_by_role("form", name="New session")
    form.get_by_label("Title").fill(title)
    if agent_config is not None:
        form.locator("summary", has_text="Agent configuration").click()
        form.get_by_label("Agent configuration (JSON)").fill(json.dumps(agent_config))
    form.get_by_role("button", name="Create").click()
    page.wait_for_url("**/console/#/s/*/chat")
    return page.url.split("#/s/", 1)[1].split("/", 1)[0]


def send(page: Page, text: str) -> None:
    """Type a message and send it with Enter."""
    box = page.get_by_label("Message")
    box.fill(text)
    box.press("Enter")
