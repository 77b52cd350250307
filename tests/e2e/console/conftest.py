"""The console's browser tests: one stack (OpenAI fake as its model) and one headless Chromium
for the module, a fresh browser context (fresh sessionStorage) per test.

The browser is Debian's ``chromium`` driven by Playwright; Playwright's own browser downloads
are never used (they cannot be reached here). A missing browser fails the tests, it does not
skip them: ``.ci/run`` installs it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    expect,
    sync_playwright,
)

from tests.conftest import Stack, start_stack, stop_stack
from tests.e2e.console.model import console_model
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.run_worker.harness import fake_server

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


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """A stack whose model is the console tests' script, and a headless Chromium."""
    assert shutil.which(CHROMIUM) or Path(CHROMIUM).exists(), (
        f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does it)"
    )
    home: Path = tmp_path_factory.mktemp("console-home")
    (home / "config.toml").write_text(CONFIG)
    fake = fake_server(console_model)
    env = {
        "SOONG_MODEL_PROVIDER": "openai",
        "SOONG_MODEL_NAME": "fake-model",
        "SOONG_MODEL_BASE_URL": fake.sdk_base_url,
        "OPENAI_API_KEY": "sk-test-not-a-real-key-000000",
    }
    stack = start_stack(home, workers=1, extra_env=env)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                yield Console(stack, fake, browser)
            finally:
                browser.close()
    finally:
        stop_stack(stack.process)
        fake.stop_thread()


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
