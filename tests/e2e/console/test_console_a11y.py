"""The console's accessibility and small screens (issue 36): axe-core (the npm package's
``axe.min.js``, injected into the page) finds no serious or critical violation on any view, in
light and in dark; at 390 px (a phone) the session list opens as a drawer, sessions can be
opened and created, and no view is wider than the screen (Files in one column).

The console tests' stack and browser (conftest.py's ``console``); a fresh context per test.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from tests.e2e.console.conftest import Console, Tab, new_session, send, sign_in
from tests.e2e.console.daily import TEAM_ANSWER, axe_violations

pytestmark = pytest.mark.e2e

PHONE: ViewportSize = {"width": 390, "height": 844}


def _check(page: Page, found: dict[str, Any], view: str) -> None:
    page.wait_for_timeout(50)  # let a just-opened view settle its styles (no assertion on time)
    violations = axe_violations(page)
    if violations:
        found[view] = violations


def _every_view(console: Console, tab: Tab, found: dict[str, Any]) -> None:
    page = tab.page
    page.goto(console.url)
    page.get_by_label("API key").wait_for()
    _check(page, found, "sign-in")
    page = sign_in(tab, console)
    _check(page, found, "home")
    page.get_by_role("button", name="New session").click()
    page.get_by_role("form", name="New session").locator("summary").click()
    _check(page, found, "new session form")
    page.get_by_role("button", name="Cancel").click()

    sid = new_session(page, "a11y", agent_config={"tool_policy": {"ask": ["write_file"]}})
    send(page, "write the report")
    card = page.get_by_role("group", name="Permission request")
    expect(card).to_be_visible()
    _check(page, found, "chat with a permission card")
    card.get_by_role("button", name="Allow").click()
    expect(page.locator(".msg.assistant", has_text="The report is in")).to_be_visible()
    send(page, "team up")
    expect(page.locator(".msg.assistant", has_text=TEAM_ANSWER)).to_be_visible()
    page.locator('[data-step="tool"] summary').first.click()
    _check(page, found, "chat with steps and children")
    page.locator(".msg.user").first.hover()
    page.locator(".msg.user").first.get_by_role("button", name="Details").click()
    expect(page.get_by_role("dialog", name="Node details")).to_be_visible()
    _check(page, found, "node details")
    page.keyboard.press("Escape")

    page.get_by_role("tab", name="Tree").click()
    page.locator("button.tree-row").first.click()
    expect(page.locator("[data-node-detail]")).to_be_visible()
    _check(page, found, "tree")
    page.get_by_role("tab", name="Runs").click()
    page.locator("details.run-row summary").first.click()
    expect(page.locator("ol.events li").first).to_be_visible()
    _check(page, found, "runs")
    page.get_by_role("tab", name="Files").click()
    page.locator('[data-file="output/report.csv"]').click()
    expect(page.locator("table.csv")).to_be_visible()
    _check(page, found, "files")
    page.get_by_role("tab", name="Tasks").click()
    _check(page, found, "tasks")
    page.get_by_role("link", name="Memory").click()
    page.get_by_label("Contents of user.md").wait_for()
    _check(page, found, "memory")
    page.get_by_role("link", name="Assistants").click()
    page.locator("[data-empty], [data-assistant]").first.wait_for()
    _check(page, found, "assistants")
    assert sid


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_view_has_a_serious_or_critical_accessibility_violation(
    console: Console, tab: Tab, scheme: str
) -> None:
    tab.page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    found: dict[str, Any] = {}
    _every_view(console, tab, found)
    assert found == {}, json.dumps(found, indent=1)


def _overflowing(page: Page) -> list[str]:
    """Elements of the page that reach past the screen's right edge (none may)."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('body *')]
              .filter((e) => { const r = e.getBoundingClientRect();
                return r.width > 0 && r.right > innerWidth + 1
                  && !e.closest('.table-wrap, pre, .tabs, .topbar, .sessions:not(.open)'); })
              .map((e) => `${e.tagName}.${e.className}`).slice(0, 10)"""
        )
    )


def test_at_390_px_sessions_open_from_a_drawer_and_every_view_fits(
    console: Console, tab: Tab
) -> None:
    page = tab.page
    page.set_viewport_size(PHONE)
    page.goto(console.url)
    page.get_by_label("API key").fill(console.stack.api_key)
    page.get_by_role("button", name="Sign in").click()
    toggle = page.get_by_role("button", name="Sessions")
    expect(toggle).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(page.get_by_role("button", name="New session")).to_be_hidden()
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    sid = new_session(page, "on a phone")
    expect(page.get_by_role("navigation", name="Sessions")).to_be_hidden()  # gave way
    send(page, "write the report")
    expect(page.locator(".msg.assistant", has_text="The report is in")).to_be_visible()
    assert _overflowing(page) == []
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")

    for name in ("Tree", "Runs", "Tasks"):
        page.get_by_role("tab", name=name).click()
        expect(page.get_by_role("tab", name=name)).to_have_attribute("aria-selected", "true")
        assert _overflowing(page) == [], name

    # Files: the list, then the preview under it, both the screen's width.
    page.get_by_role("tab", name="Files").click()
    page.locator('[data-file="output/report.csv"]').click()
    expect(page.locator("table.csv")).to_be_visible()
    listing = page.locator(".files-main").bounding_box()
    preview = page.locator(".file-preview").bounding_box()
    assert listing is not None and preview is not None
    assert preview["y"] >= listing["y"] + listing["height"] - 1  # below, not beside
    assert preview["width"] > PHONE["width"] * 0.9
    assert _overflowing(page) == []

    # Another session is opened from the drawer too; Escape closes it.
    page.get_by_role("button", name="Sessions").click()
    nav = page.get_by_role("navigation", name="Sessions")
    expect(nav).to_be_visible()
    page.keyboard.press("Escape")
    expect(nav).to_be_hidden()
    page.get_by_role("button", name="Sessions").click()
    page.locator(f'a[data-session-id="{sid}"]').click()
    expect(nav).to_be_hidden()
    expect(page.locator(".session-head h2")).to_have_text("on a phone")
