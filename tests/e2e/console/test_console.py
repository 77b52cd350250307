"""The web console in headless Chromium against a running stack (see conftest.py and model.py).

Each test is one thing a person does with the console: sign in and chat (a streamed answer
with a tool step), branch and switch back on the tree, move files in and out, reload in the
middle of a run and answer its permission request in place, see a failed run's reason and
cancel a running one, keep tasks and memory, and find where other clients call an assistant.
Every page must log no error and no refused
script or style along the way.
"""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.e2e.console.conftest import Console, Tab, new_session, send, sign_in
from tests.e2e.console.model import PART_ONE, PART_TWO, REPORT_CSV
from tests.e2e.console.screenshots import capture

pytestmark = pytest.mark.e2e

UNIT_CHECKS = Path(__file__).with_name("unit_checks.js")


def _console_event_ids(page: Page, run_id: str) -> list[str]:
    """The event ids the page applied for a live run, in order (its event log)."""
    live = page.locator(f'[data-live-run="{run_id}"]')
    log = live.locator("details.event-log")
    if log.get_attribute("open") is None:
        log.locator("summary").click()
    return list(log.locator("li").evaluate_all("els => els.map(e => e.dataset.eventId)"))


def _live_run_id(page: Page) -> str:
    live = page.locator("[data-live-run]")
    live.wait_for()
    run_id = live.get_attribute("data-live-run")
    assert run_id
    return run_id


def _stream_so_far(client: httpx.Client, session_id: str, run_id: str) -> list[str]:
    """The event ids of a waiting run's stream up to now: read until the first keep-alive."""
    url = f"/v1/sessions/{session_id}/runs/{run_id}/events"
    ids: list[str] = []
    with client.stream("GET", url, params={"keepalive_s": 0.5}) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith(":"):  # idle: the stream has nothing more for now
                break
            if line.startswith("id:"):
                ids.append(line[3:].strip())
    return ids


def test_pure_modules_hold_in_the_browser(console: Console, tab: Tab) -> None:
    tab.page.goto(console.url)
    failures = tab.page.evaluate(UNIT_CHECKS.read_text())
    assert failures == []


def test_sign_in_create_chat_with_a_tool_step_search_and_archive(
    console: Console, tab: Tab, tmp_path: Path
) -> None:
    page = tab.page
    page.goto(console.url)
    page.get_by_label("API key").fill("sa_live_not-a-key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("The gateway did not accept this key.")
    assert page.evaluate("sessionStorage.length") == 0
    page = sign_in(tab, console)
    assert page.evaluate("sessionStorage.getItem('soong.apiKey')") == console.stack.api_key
    assert page.evaluate("localStorage.length") == 0

    session_id = new_session(page, "Quarterly report")
    send(page, "write the report")
    # The streamed answer, after the tool step that wrote the file.
    expect(
        page.locator(".msg.assistant", has_text="The report is in output/report.csv.")
    ).to_be_visible()
    step = page.locator('[data-step="tool"]', has_text="write_file")
    expect(step).to_have_count(1)
    expect(step.locator(".status")).to_have_text("done")
    step.locator("summary").click()
    expect(step).to_contain_text("Wrote 23 bytes to output/report.csv")
    # The artifact the tool call made is linked from its step.
    expect(page.locator(".made .artifact", has_text="report.csv")).to_be_visible()
    capture(page, "chat", tmp_path)

    # Search by title and by id; archive; find it among the archived.
    search = page.get_by_label("Search sessions by title or id")
    search.fill("quarterly")
    expect(page.locator(f'a[data-session-id="{session_id}"]')).to_be_visible()
    search.fill("no such title")
    expect(page.locator("a[data-session-id]")).to_have_count(0)
    search.fill(session_id[-8:])
    expect(page.locator(f'a[data-session-id="{session_id}"]')).to_be_visible()
    search.fill("")
    page.get_by_role("button", name="Archive").click()
    expect(page.locator(".session-head .chip")).to_have_text("archived")
    expect(page.locator(f'a[data-session-id="{session_id}"]')).to_have_count(0)
    page.get_by_label("archived").check()
    expect(page.locator(f'a[data-session-id="{session_id}"]')).to_be_visible()


def test_branch_from_an_earlier_message_and_switch_back(
    console: Console, tab: Tab, tmp_path: Path
) -> None:
    page = sign_in(tab, console)
    new_session(page, "branches")
    send(page, "first")
    expect(page.locator(".msg.assistant", has_text="Echo: first")).to_be_visible()
    send(page, "second")
    expect(page.locator(".msg.assistant", has_text="Echo: second")).to_be_visible()

    first = page.locator(".msg.assistant", has_text="Echo: first")
    first.hover()
    first.get_by_role("button", name="Branch from here").click()
    expect(page.locator(".branch-note")).to_contain_text("Echo: first")
    send(page, "alternative")
    expect(page.locator(".msg.assistant", has_text="Echo: alternative")).to_be_visible()
    expect(page.locator(".msg", has_text="Echo: second")).to_have_count(0)

    page.get_by_role("tab", name="Tree").click()
    rows = page.locator("button.tree-row")
    expect(rows).to_have_count(6)
    on_path = page.locator('button.tree-row[data-on-path="true"]')
    expect(on_path).to_have_count(4)  # first, its answer, alternative, its answer
    expect(page.locator("button.tree-row[aria-current=true]")).to_contain_text("Echo: alternative")
    # Keyboard: the rows are a list the arrow keys walk.
    rows.first.focus()
    page.keyboard.press("ArrowDown")
    expect(rows.nth(1)).to_be_focused()

    page.locator("button.tree-row", has_text="Echo: second").click()
    detail = page.locator("[data-node-detail]")
    expect(detail.locator("[data-token-count]")).to_have_text(re.compile(r"^\d+$"))
    expect(detail).to_contain_text("Echo: second")
    detail.get_by_role("button", name="Switch here").click()
    expect(page.locator("button.tree-row[aria-current=true]")).to_contain_text("Echo: second")
    expect(on_path).to_have_count(4)
    capture(page, "tree", tmp_path)

    page.get_by_role("tab", name="Chat").click()
    expect(page.locator(".msg.assistant", has_text="Echo: second")).to_be_visible()
    expect(page.locator(".msg", has_text="alternative")).to_have_count(0)


def test_regenerate_an_answer_and_edit_the_first_message_as_a_new_branch(
    console: Console, tab: Tab
) -> None:
    page = sign_in(tab, console)
    new_session(page, "regenerate")
    send(page, "first")
    answer = page.locator(".msg.assistant", has_text="Echo: first")
    expect(answer).to_be_visible()
    answer.hover()
    answer.get_by_role("button", name="Regenerate").click()
    # The turn is answered again beside the first: two turns in the tree, the new one active.
    page.get_by_role("tab", name="Tree").click()
    rows = page.locator("button.tree-row")
    expect(rows).to_have_count(4)
    expect(page.locator('button.tree-row[data-on-path="true"]')).to_have_count(2)
    page.get_by_role("tab", name="Chat").click()
    expect(page.locator(".msg.assistant", has_text="Echo: first")).to_have_count(1)

    # A user message is not branched under (two user messages in a row) but replaced: its text
    # comes into the message box, and what is sent goes in its place.
    message = page.locator(".msg.user", has_text="first")
    message.hover()
    message.get_by_role("button", name="Edit as new branch").click()
    expect(page.locator(".branch-note")).to_contain_text("Replacing")
    box = page.get_by_label("Message")
    expect(box).to_have_value("first")
    box.fill("edited")
    box.press("Enter")
    expect(page.locator(".msg.assistant", has_text="Echo: edited")).to_be_visible()
    expect(page.locator(".msg", has_text="Echo: first")).to_have_count(0)
    page.get_by_role("tab", name="Tree").click()
    expect(rows).to_have_count(6)


def test_upload_by_drag_and_drop_preview_and_download(
    console: Console, tab: Tab, tmp_path: Path
) -> None:
    page = sign_in(tab, console)
    session_id = new_session(page, "files")
    send(page, "write the table")
    expect(page.locator(".msg.assistant", has_text="The report is in")).to_be_visible()

    page.get_by_role("tab", name="Files").click()
    page.locator('[data-file="output/report.csv"]').click()
    expect(page.locator("table.csv td", has_text="ada")).to_be_visible()
    with page.expect_download() as download:
        page.locator(".file-preview").get_by_role("button", name="Download").click()
    assert download.value.suggested_filename == "report.csv"
    assert Path(download.value.path()).read_text() == REPORT_CSV

    page.get_by_role("tab", name="input/").click()
    dropped = page.evaluate_handle(
        """() => { const dt = new DataTransfer();
          dt.items.add(new File(['dropped notes\\n'], 'notes.txt', {type: 'text/plain'}));
          return dt; }"""
    )
    page.dispatch_event("[data-dropzone]", "drop", {"dataTransfer": dropped})
    page.locator('[data-file="input/notes.txt"]').click()
    expect(page.locator('[data-preview="text"]')).to_have_text("dropped notes\n")
    with console.api() as api:
        stored = api.get(f"/v1/sessions/{session_id}/files/input/notes.txt")
        assert stored.status_code == 200 and stored.text == "dropped notes\n"

    png = _png_2x2()
    page.locator("[data-file-picker]").set_input_files(
        files=[{"name": "dot.png", "mimeType": "image/png", "buffer": png}]
    )
    page.locator('[data-file="input/dot.png"]').click()
    image = page.locator('img[data-preview="image"]')
    expect(image).to_be_visible()
    assert image.evaluate("img => img.naturalWidth") == 2

    # The artifact's tool call is one click away.
    page.get_by_role("tab", name="output/").click()
    page.locator('[data-file="output/report.csv"]').click()
    capture(page, "files", tmp_path)
    page.locator("[data-made-by]").first.click()
    expect(page.locator(".step-wrap.flash")).to_contain_text("write_file")


def test_reload_mid_run_resumes_the_activity_and_the_permission_is_answered_in_place(
    console: Console, tab: Tab, tmp_path: Path
) -> None:
    page = sign_in(tab, console)
    policy: dict[str, Any] = {"tool_policy": {"default": "allow", "ask": ["write_file"]}}
    session_id = new_session(page, "approval", agent_config=policy)
    send(page, "ask before writing")
    run_id = _live_run_id(page)
    expect(page.locator("[data-live-text]")).to_contain_text("a03")

    # Reload while the answer streams. The run then stops to wait for a person, however long
    # the reload took, so its stream is still when compared: the page must hold exactly the
    # events the server streamed, in order, each once, and the text exactly as written.
    page.reload()
    card = page.get_by_role("group", name="Permission request")
    expect(card).to_contain_text("write_file")
    live = page.locator(f'[data-live-run="{run_id}"]')
    expect(live).to_have_attribute("data-status", "pending")
    with console.api() as api:
        streamed = _stream_so_far(api, session_id, run_id)
    assert _console_event_ids(page, run_id) == streamed
    assert live.locator("[data-live-text]").all_inner_texts() == [PART_ONE]
    expect(live.locator('[data-step="tool"]')).to_have_count(1)
    capture(page, "permission", tmp_path)

    # Answered in place; the run goes on and its activity with it.
    card.get_by_role("button", name="Allow").click()
    answer = page.locator(".msg.assistant", has_text=PART_TWO)
    expect(answer).to_be_visible()
    # The text alone: the message's actions show when the pointer happens to rest on it.
    assert answer.locator(".msg-text").inner_text().strip() == PART_TWO
    expect(page.locator(".msg.assistant", has_text="a30")).to_have_count(1)
    step = page.locator('[data-step="tool"]', has_text="write_file")
    expect(step.locator(".status")).to_have_text("done")
    expect(page.get_by_role("group", name="Permission request")).to_have_count(0)
    with console.api() as api:
        approved = api.get(f"/v1/sessions/{session_id}/files/output/approved.txt")
        assert approved.status_code == 200 and approved.text == "approved\n"


def test_a_failed_run_says_why_a_running_one_is_cancelled_and_the_timeline_shows_both(
    console: Console, tab: Tab, tmp_path: Path
) -> None:
    page = sign_in(tab, console)
    new_session(page, "endings")
    send(page, "hello")
    expect(page.locator(".msg.assistant", has_text="Echo: hello")).to_be_visible()

    send(page, "fail this one")
    failed = page.locator('.ending[data-run-status="failed"]')
    expect(failed.locator("[data-error-code]")).to_have_text("bad_request")
    send(page, "slow again")
    expect(page.locator("[data-live-text]")).to_contain_text("w02")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator('.ending[data-run-status="cancelled"]')).to_contain_text(
        "aborted_streaming"
    )

    page.get_by_role("tab", name="Runs").click()
    runs = page.locator("details.run-row")
    expect(runs).to_have_count(3)
    expect(runs.nth(0)).to_have_attribute("data-status", "cancelled")
    expect(runs.nth(1).locator("[data-error-code]")).to_have_text("bad_request")
    runs.nth(1).locator("summary").click()
    expect(runs.nth(1).locator('[data-event-type="run_failed"]')).to_be_visible()
    expect(runs.nth(2)).to_contain_text("completed")
    capture(page, "runs", tmp_path)


def test_task_board_and_memory_editor_with_etags(
    console: Console, tab: Tab, tmp_path: Path
) -> None:
    page = sign_in(tab, console)
    new_session(page, "planning")
    send(page, "plan the launch")
    expect(page.locator(".msg.assistant", has_text="The plan is on the board.")).to_be_visible()
    page.get_by_role("tab", name="Tasks").click()
    ready = page.locator('[data-task-list="launch"] [data-column="ready"] [data-task-id]')
    expect(ready).to_have_text([re.compile("Write the notes"), re.compile("Ship it")])
    capture(page, "tasks", tmp_path)

    page.get_by_role("link", name="Memory").click()
    editor = page.get_by_label("Contents of user.md")
    mine = "---\nscope: user\n---\n- Prefers short answers.\n"
    editor.fill(mine)
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    etag = page.locator("[data-etag]").inner_text()

    # Someone else changes the file; saving over it is refused until the person chooses.
    theirs = "---\nscope: user\n---\n- Writes in French.\n"
    with console.api() as api:
        changed = api.put(
            "/v1/memory/user", json={"content": theirs}, headers={"If-Match": f'"{etag}"'}
        )
        assert changed.status_code == 200, changed.text
        # The service owns the frontmatter (it adds its own fields); the lines are the user's.
        stored = api.get("/v1/memory/user").json()["content"]
        assert _lines(stored) == _lines(theirs)
        editor.fill(mine + "- Likes tables.\n")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("[data-theirs]")).to_have_text(stored)
        capture(page, "memory", tmp_path)
        page.get_by_role("button", name="Replace it with mine").click()
        expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
        saved = api.get("/v1/memory/user").json()["content"]
        assert _lines(saved) == _lines(mine + "- Likes tables.\n")


def test_assistants_view_shows_where_other_clients_call_each_one(
    console: Console, tab: Tab, tmp_path: Path
) -> None:
    with console.api() as api:  # no other test of this module makes an assistant
        assert api.get("/v1/assistants").json()["items"] == []
    page = sign_in(tab, console)
    page.get_by_role("link", name="Assistants").click()
    empty = page.locator("[data-empty]")
    expect(empty).to_contain_text("soong-agent assistants create")
    expect(empty).to_contain_text("POST /v1/assistants")

    with console.api() as api:
        made = api.post(
            "/v1/assistants",
            json={
                "name": "reviewer",
                "description": "Reviews patches",
                "instructions": "Be brief.",
            },
        )
        assert made.status_code == 201, made.text
    page.get_by_role("button", name="Reload").click()
    card = page.locator('[data-assistant="reviewer"]')
    expect(card).to_contain_text("Reviews patches")
    gateway = page.evaluate("location.origin")
    assert gateway == console.stack.gateway_url.rstrip("/")
    shown = {
        kind: card.locator(f'[data-endpoint="{kind}"]').inner_text()
        for kind in ("mcp", "openai", "model", "a2a")
    }
    assert shown == {
        "mcp": f"{gateway}/mcp",
        "openai": f"{gateway}/v1/openai",
        "model": "reviewer",
        "a2a": f"{gateway}/a2a/reviewer/.well-known/agent-card.json",
    }
    expect(card.locator("dd").first).to_contain_text("the tool is named reviewer")

    # A copy button is a real button: reached and pressed from the keyboard.
    tab.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=gateway)
    copy = card.get_by_role("button", name="Copy OpenAI base URL of reviewer")
    copy.focus()
    page.keyboard.press("Enter")
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == shown["openai"]
    capture(page, "assistants", tmp_path)

    # The URLs shown work, with the key: the OpenAI endpoint answers as the assistant, and the
    # A2A card is the assistant's.
    with console.api() as api:
        answer = api.post(
            shown["openai"] + "/chat/completions",
            json={"model": shown["model"], "messages": [{"role": "user", "content": "hello"}]},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "Echo: hello"
        agent_card = api.get(shown["a2a"])
        assert agent_card.status_code == 200, agent_card.text
        assert agent_card.json()["name"] == "reviewer"

    # A phone's width: every URL and button of the card stays on the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    outside = page.evaluate(
        """() => [...document.querySelectorAll('.topbar > *, .assistant code, .assistant button')]
          .filter((e) => e.getBoundingClientRect().right > innerWidth)
          .map((e) => e.textContent)"""
    )
    assert outside == []


def _lines(memory_file: str) -> str:
    """A memory file's lines under its frontmatter."""
    return memory_file.split("\n---\n", 1)[1]


def _png_2x2() -> bytes:
    """A valid 2×2 PNG, made here (zlib + CRC) rather than shipped."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"".join(b"\x00" + b"\xff\x00\x00\xff" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
