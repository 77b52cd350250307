"""A big session in the console (issue 36): at 2,500 nodes the chat and the tree draw only what
is on screen (a windowed list), and sending a message draws the new items only, leaving the
ones on screen as they were. How fast is ``bench/console.py``'s (``*_ms_2500``); here, what is
drawn.

The console tests' stack and browser (conftest.py's ``console``), one seeded session.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.console.big import big_session
from tests.e2e.console.conftest import Console, Tab, send, sign_in

pytestmark = pytest.mark.e2e

NODES = 2500
DRAWN_AT_MOST = 150  # a screen's worth and the margins around it, far from 2,500


@pytest.fixture(scope="module")
def big(console: Console) -> str:
    return big_session(console.stack, NODES)


def test_a_big_chat_draws_what_is_on_screen_and_a_send_keeps_it(
    console: Console, tab: Tab, big: str
) -> None:
    page = sign_in(tab, console)
    page.goto(f"{console.url}#/s/{big}/chat")
    last = page.locator(".msg.user", has_text=f"message {NODES - 2}:")
    expect(page.locator(".msg.assistant", has_text=f"message {NODES - 1}:")).to_be_in_viewport()
    drawn = page.locator(".conversation .msg").count()
    assert 0 < drawn <= DRAWN_AT_MOST

    # What is drawn now stays drawn, the same elements, through a whole run.
    page.evaluate(
        "document.querySelectorAll('.win-item').forEach((e) => { e.dataset.kept = '1'; })"
    )
    kept_before = page.locator(".win-item[data-kept]").count()
    send(page, "hello big")
    expect(page.locator(".msg.assistant", has_text="Echo: hello big")).to_be_in_viewport()
    expect(page.locator("[data-live-run]")).to_have_count(0)  # settled: the stored nodes show
    expect(last).to_be_visible()
    assert page.locator(".conversation .msg").count() <= DRAWN_AT_MOST
    # Scrolled down by the two new messages, a few of the oldest drawn ones may leave the window;
    # none of the others is drawn again.
    assert page.locator(".win-item[data-kept]").count() >= kept_before - 6

    # Scrolling to the top draws the first message (and not the last any more).
    page.locator(".conversation").evaluate("(el) => { el.scrollTop = 0; }")
    expect(page.locator(".msg.user", has_text="message 0:")).to_be_visible()
    expect(page.locator(".msg", has_text=f"message {NODES - 1}:")).to_have_count(0)


def test_a_big_tree_draws_what_is_on_screen_and_the_keys_reach_both_ends(
    console: Console, tab: Tab, big: str
) -> None:
    page = sign_in(tab, console)
    page.goto(f"{console.url}#/s/{big}/tree")
    active = page.locator("button.tree-row[aria-current=true]")
    expect(active).to_be_in_viewport()
    assert page.locator("button.tree-row").count() <= DRAWN_AT_MOST
    expect(page.locator("svg.tree-graph circle")).not_to_have_count(0)
    assert page.locator("svg.tree-graph circle").count() <= DRAWN_AT_MOST
    active.focus()
    page.keyboard.press("Home")
    first = page.locator("button.tree-row", has_text="message 0:")
    expect(first).to_be_focused()
    expect(first).to_be_in_viewport()
    assert page.locator("button.tree-row").count() <= DRAWN_AT_MOST
    page.keyboard.press("End")
    end = page.locator("button.tree-row:focus")
    expect(end).to_be_in_viewport()
    assert end.get_attribute("aria-posinset") == end.get_attribute("aria-setsize")
