"""The console for daily work (issue 36), in headless Chromium against a running stack: the
``phase`` event as a quiet status line, runs in flight on the Runs tab, child agents by name that
stay in the chat, every invalid field of an agent config with its reason, a connection-lost
indicator, and a keyboard-only walk through chat, branch, details, tree and a permission card.

The console tests' stack and browser (conftest.py's ``console``); a fresh context per test.
"""

from __future__ import annotations

import json
import re
import signal
import time

import httpx
import psutil
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.console.conftest import Console, Tab, new_session, send, sign_in
from tests.e2e.console.daily import (
    TEAM_ANSWER,
    focus_becomes,
    focused,
    tab_until,
)
from tests.e2e.console.model import PART_ONE, PART_TWO

pytestmark = pytest.mark.e2e


def test_children_by_name_with_their_phase_and_kept_after_the_run(
    console: Console, tab: Tab
) -> None:
    page = sign_in(tab, console)
    new_session(page, "team")
    send(page, "team up")
    # Live: each worker under its name, with where it is as a status line, never an event box.
    alpha = page.locator('[data-live-run] [data-step="child"][data-child-name="alpha"]')
    expect(alpha.locator("summary strong")).to_have_text("alpha")
    expect(
        page.locator('[data-live-run] [data-step="child"][data-child-name="beta"]')
    ).to_be_visible()
    expect(alpha.locator(".phase")).to_contain_text("turn 1 of")
    expect(page.locator('[data-event-type="phase"]')).to_have_count(0)
    # Ended: the conversation still shows both workers, by name, with how they ended.
    expect(page.locator(".msg.assistant", has_text=TEAM_ANSWER)).to_be_visible()
    expect(page.locator("[data-live-run]")).to_have_count(0)
    kept = page.locator('.child-agent[data-step="child"]')
    expect(kept).to_have_count(2)
    expect(page.locator('.child-agent[data-child-name="alpha"]')).to_contain_text("completed")
    expect(page.locator('.child-agent[data-child-name="beta"]')).to_contain_text("beta")
    expect(page.locator('[data-event-type="phase"]')).to_have_count(0)


def test_the_runs_tab_lists_a_run_waiting_for_permission(console: Console, tab: Tab) -> None:
    page = sign_in(tab, console)
    new_session(page, "waiting", agent_config={"tool_policy": {"ask": ["write_file"]}})
    send(page, "ask before writing")
    expect(page.get_by_role("group", name="Permission request")).to_be_visible()
    page.get_by_role("tab", name="Runs").click()
    expect(page.get_by_text("No runs yet.")).to_have_count(0)
    row = page.locator("details.run-row")
    expect(row).to_have_count(1)
    expect(row.locator(".status")).to_have_text("waiting for permission")


def test_a_bad_agent_config_names_every_invalid_field_with_its_reason(
    console: Console, tab: Tab
) -> None:
    page = sign_in(tab, console)
    page.get_by_role("button", name="New session").click()
    form = page.get_by_role("form", name="New session")
    form.locator("summary", has_text="Agent configuration").click()
    bad = {"max_turns": 0, "temperature": 9, "tool_policy": {"default": "sometimes"}}
    form.get_by_label("Agent configuration (JSON)").fill(json.dumps(bad))
    form.get_by_role("button", name="Create").click()
    alert = form.get_by_role("alert")
    expect(alert.locator("li")).to_have_count(3)
    expect(alert.locator('[data-field="max_turns"]')).to_contain_text(
        re.compile("greater than or equal to 1")
    )
    expect(alert.locator('[data-field="temperature"]')).to_contain_text(
        re.compile("less than or equal to 2")
    )
    expect(alert.locator('[data-field="tool_policy.default"]')).to_contain_text(
        re.compile("'allow'")
    )


def test_a_dropped_stream_says_so_until_it_is_back(console: Console, tab: Tab) -> None:
    page = sign_in(tab, console)
    new_session(page, "offline", agent_config={"tool_policy": {"ask": ["write_file"]}})
    send(page, "ask before writing")
    card = page.get_by_role("group", name="Permission request")
    expect(card).to_be_visible()
    lost = page.locator('[data-connection="lost"]')
    expect(lost).to_have_count(0)
    # The gateway dies under the open stream (its supervisor starts another) while the browser
    # is offline: every retry fails until it is back online.
    tab.context.set_offline(True)
    victim = _gateway_of(console.stack.process.pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    expect(lost).to_be_visible()
    expect(lost).to_contain_text("reconnecting")
    _wait_for_gateway(console)  # back online with a gateway to answer: the page retries at once
    tab.context.set_offline(False)
    expect(lost).to_have_count(0)  # resumed (a new gateway answers)
    card.get_by_role("button", name="Allow").click()
    expect(page.locator(".msg.assistant", has_text=PART_TWO)).to_be_visible()
    # The browser logs the cut stream and the refused retries: what this test did on purpose.
    tab.problems[:] = [p for p in tab.problems if "net::ERR_" not in p]


def _wait_for_gateway(console: Console) -> None:
    deadline = time.monotonic() + 60
    while True:  # the supervisor brings a new gateway up
        try:
            with console.api() as api:
                if api.get("/healthz").status_code == 200:
                    return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "no gateway again within 60 s"
        time.sleep(0.2)


def _gateway_of(stack_pid: int) -> psutil.Process:
    for child in psutil.Process(stack_pid).children(recursive=True):
        if "serve gateway" in " ".join(child.cmdline()):
            return child
    raise AssertionError("no gateway process under the stack")


def _press_text(page: Page, text: str) -> None:
    page.keyboard.type(text)
    page.keyboard.press("Enter")


def test_keyboard_only_chat_branch_details_tree_switch_and_a_permission(
    console: Console, tab: Tab
) -> None:
    page = tab.page
    page.goto(console.url)
    page.get_by_label("API key").focus()
    _press_text(page, console.stack.api_key)
    new = page.get_by_role("button", name="New session")
    new.wait_for()

    # New session: the form takes the focus; Create leaves it in the message box.
    tab_until(page, lambda f: f["text"] == "New session")
    page.keyboard.press("Enter")
    focus_becomes(page, lambda f: f["tag"] == "INPUT", "the form's title")
    page.keyboard.type("keys")
    tab_until(page, lambda f: f["text"] == "Create")
    page.keyboard.press("Enter")
    page.wait_for_url("**/console/#/s/*/chat")
    expect(page.get_by_label("Message")).to_be_focused()
    _press_text(page, "first")
    expect(page.locator(".msg.assistant", has_text="Echo: first")).to_be_visible()
    _press_text(page, "second")
    expect(page.locator(".msg.assistant", has_text="Echo: second")).to_be_visible()

    # "Branch from here" is reached with Tab (it shows when focused), and used with Enter.
    first_answer = page.locator(".msg.assistant", has_text="Echo: first")
    first_id = first_answer.get_attribute("data-node-id")
    tab_until(
        page,
        lambda f: (
            f["text"] == "Branch from here"
            and page.evaluate("document.activeElement.closest('.msg').dataset.nodeId") == first_id
        ),
        back=True,
    )
    expect(first_answer.locator(".msg-actions")).to_have_css("opacity", "1")
    page.keyboard.press("Enter")
    expect(page.locator(".branch-note")).to_contain_text("Echo: first")
    expect(page.get_by_label("Message")).to_be_focused()
    _press_text(page, "alternative")
    expect(page.locator(".msg.assistant", has_text="Echo: alternative")).to_be_visible()
    expect(page.locator(".msg", has_text="Echo: second")).to_have_count(0)

    # "Details" too; Escape closes the panel and gives the focus back.
    tab_until(
        page,
        lambda f: (
            f["text"] == "Details"
            and page.evaluate("document.activeElement.closest('.msg').dataset.nodeId") == first_id
        ),
        back=True,
    )
    page.keyboard.press("Enter")
    detail = page.locator(f'[data-node-detail="{first_id}"]')
    expect(detail).to_be_visible()
    expect(page.get_by_role("dialog", name="Node details")).to_be_visible()
    # The panel takes the focus in an effect after its first paint, not by the time it shows.
    page.wait_for_function("!!document.activeElement?.closest('.overlay')", timeout=10_000)
    page.keyboard.press("Escape")
    expect(detail).to_have_count(0)
    focus_becomes(page, lambda f: f["text"] == "Details", "the Details button again")

    # The tree is one Tab stop (the active node); arrow keys walk it.
    tab_until(page, lambda f: f["role"] == "tab" and f["text"] == "Chat", back=True)
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("tab", name="Tree")).to_be_focused()
    rows = page.locator("button.tree-row")
    expect(rows).to_have_count(6)
    stop = tab_until(page, lambda f: f["role"] == "option")
    assert "Echo: alternative" in stop["text"]  # the active node holds the Tab stop
    page.keyboard.press("Tab")
    focus_becomes(page, lambda f: f["role"] != "option", "past the tree")  # one Tab leaves it
    page.keyboard.press("Shift+Tab")
    focus_becomes(page, lambda f: "Echo: alternative" in f["text"], "the active node")
    for _ in range(6):
        if "Echo: second" in focused(page)["text"]:
            break
        before = focused(page)["data"]
        page.keyboard.press("ArrowUp")
        focus_becomes(page, lambda f, b=before: f["data"] != b, "the row above")
    assert "Echo: second" in focused(page)["text"]
    page.keyboard.press("Enter")
    expect(page.locator("[data-node-detail]")).to_contain_text("Echo: second")
    tab_until(page, lambda f: f["text"] == "Switch here")
    page.keyboard.press("Enter")
    expect(page.locator("button.tree-row[aria-current=true]")).to_contain_text("Echo: second")

    # A permission card, answered from the keyboard, in a session whose policy asks only about
    # write_file: the task tools it does not list keep the default (they run without asking).
    tab_until(page, lambda f: f["text"] == "New session", back=True)
    page.keyboard.press("Enter")
    focus_becomes(page, lambda f: f["tag"] == "INPUT", "the form's title")
    page.keyboard.type("asking")
    tab_until(page, lambda f: f["text"] == "Agent configuration")
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    focus_becomes(page, lambda f: f["label"] == "Agent configuration (JSON)", "the JSON box")
    page.keyboard.type(json.dumps({"tool_policy": {"ask": ["write_file"]}}))
    tab_until(page, lambda f: f["text"] == "Create")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/console/#/s/.*/chat"))
    expect(page.get_by_label("Message")).to_be_focused()
    _press_text(page, "plan the launch")
    expect(page.locator(".msg.assistant", has_text="The plan is on the board.")).to_be_visible()
    expect(page.get_by_role("group", name="Permission request")).to_have_count(0)
    _press_text(page, "ask before writing")
    card = page.get_by_role("group", name="Permission request")
    expect(card).to_contain_text("write_file")
    expect(page.locator("[data-live-text]")).to_have_text(PART_ONE)
    tab_until(page, lambda f: f["text"] == "Allow", back=True)
    page.keyboard.press("Enter")
    expect(page.locator(".msg.assistant", has_text=PART_TWO)).to_be_visible()
