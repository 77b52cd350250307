"""The console's views of a session as a whole, in headless Chromium against a running stack:
search by message text, a new session from a named assistant, export and delete, the agents,
a run's trace, the model's full context at a node, approving a tool call with edited arguments,
and a memory file's history with a restore. (Fixtures and the scripted model: conftest.py and
model.py.)"""

from __future__ import annotations

import asyncio
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from agent_core.bus import Bus, BusNames, RpcClient, make_redis
from agent_core.bus.contracts.storage import CreateAgent
from agent_core.ids import new_id
from agent_core.storage_client import StorageClient, raise_for_receipt
from agent_core.types.enums import AgentType
from tests.e2e.console.conftest import Console, Tab, new_session, send, sign_in

pytestmark = pytest.mark.e2e


def _open_session(page: Page, session_id: str, tab: str = "chat") -> None:
    page.evaluate(f"location.hash = '#/s/{session_id}/{tab}'")
    page.locator(f'[data-session="{session_id}"]').wait_for()


def _api_session(api: httpx.Client, **body: Any) -> str:
    created = api.post("/v1/sessions", json=body)
    assert created.status_code == 201, created.text
    return str(created.json()["session_id"])


def _wait_run(api: httpx.Client, session_id: str, run_id: str) -> dict[str, Any]:
    with api.stream("GET", f"/v1/sessions/{session_id}/runs/{run_id}/events") as r:
        for _ in r.iter_lines():
            pass
    run: dict[str, Any] = api.get(f"/v1/sessions/{session_id}/runs/{run_id}").json()
    return run


def _seed_agent(console: Console, session_id: str, parent: str, name: str) -> str:
    """A worker agent of the session, as a run's dispatch creates it (through the bus)."""
    home: Path = console.stack.home
    redis_url = json.loads((home / "run" / "stack.json").read_text())["redis_url"]

    async def go() -> str:
        bus = Bus(make_redis(redis_url))
        names = BusNames("soong")
        rpc = RpcClient(bus, names.reply_channel(f"test-{new_id('cmd')}"))
        await rpc.start()
        try:
            agent_id = new_id("agent")
            command = CreateAgent(
                command_id=new_id("cmd"),
                session_id=session_id,
                agent_id=agent_id,
                agent_type=AgentType.SUB,
                parent_agent_id=parent,
                metadata={"worker": name},
            )
            raise_for_receipt(await StorageClient(rpc, names).send(command))
            return agent_id
        finally:
            await rpc.stop()
            await bus.aclose()

    # Playwright's sync API runs an event loop in this thread: the bus client gets its own.
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, go()).result()


def test_search_finds_a_session_by_its_message_text(console: Console, tab: Tab) -> None:
    with console.api() as api:
        sid = _api_session(api, metadata={"title": "Unremarkable"})
        run_id = api.post(f"/v1/sessions/{sid}/messages", json={"text": "zanzibar spices"})
        _wait_run(api, sid, run_id.json()["run_id"])
    page = sign_in(tab, console)
    search = page.get_by_label("Search sessions by title or id")
    search.fill("zanzibar")
    hit = page.locator(f'a[data-session-id="{sid}"]')
    expect(hit).to_be_visible()
    expect(hit.locator("[data-snippet]")).to_contain_text("[zanzibar]")
    expect(page.locator("a[data-session-id]")).to_have_count(1)
    search.fill("zanzibar nowhere")
    expect(page.locator("a[data-session-id]")).to_have_count(0)


def test_a_new_session_from_a_named_assistant(console: Console, tab: Tab) -> None:
    with console.api() as api:
        made = api.post("/v1/assistants", json={"name": "helper", "instructions": "Be kind."})
        assert made.status_code == 201, made.text
    page = sign_in(tab, console)
    page.get_by_role("button", name="New session").click()
    form = page.get_by_role("form", name="New session")
    form.get_by_label("Title").fill("assisted")
    form.get_by_label("Assistant").select_option("helper")
    form.get_by_role("button", name="Create").click()
    page.wait_for_url("**/console/#/s/*/chat")
    sid = page.url.split("#/s/", 1)[1].split("/", 1)[0]
    with console.api() as api:
        session = api.get(f"/v1/sessions/{sid}").json()
    assert session["metadata"]["assistant"]["name"] == "helper"


def test_export_then_delete_a_session(console: Console, tab: Tab) -> None:
    page = sign_in(tab, console)
    sid = new_session(page, "short-lived")
    send(page, "hello there")
    expect(page.locator(".msg.assistant", has_text="Echo: hello there")).to_be_visible()

    with page.expect_download() as download:
        page.get_by_role("button", name="Export JSON").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["session"]["session_id"] == sid
    assert any(
        b.get("text") == "Echo: hello there" for n in exported["nodes"] for b in n["content"]
    )
    assert len(exported["runs"]) == 1 and exported["events"]

    page.get_by_role("button", name="Delete").click()
    dialog = page.get_by_role("alertdialog")
    expect(dialog.get_by_role("button", name="Keep it")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    page.get_by_role("button", name="Delete").click()
    page.get_by_role("button", name="Delete for good").click()
    page.wait_for_url("**/console/#/")
    expect(page.locator(f'a[data-session-id="{sid}"]')).to_have_count(0)
    with console.api() as api:
        assert api.get(f"/v1/sessions/{sid}").status_code == 404
        audit = api.get("/v1/audit").json()["items"]
        assert [e["event_type"] for e in audit if e["session_id"] == sid] == ["session_deleted"]


def test_delete_of_a_session_with_a_waiting_run_says_to_cancel_it(
    console: Console, tab: Tab
) -> None:
    page = sign_in(tab, console)
    policy: dict[str, Any] = {"tool_policy": {"default": "allow", "ask": ["write_file"]}}
    sid = new_session(page, "busy", agent_config=policy)
    send(page, "ask first")
    expect(page.get_by_role("group", name="Permission request")).to_be_visible()
    page.get_by_role("button", name="Delete").click()
    page.get_by_role("button", name="Delete for good").click()
    expect(page.get_by_role("alertdialog").get_by_role("alert")).to_contain_text(
        "cancel them first"
    )
    with console.api() as api:
        assert api.get(f"/v1/sessions/{sid}").status_code == 200


def test_agents_view_shows_main_and_workers_by_name(console: Console, tab: Tab) -> None:
    with console.api() as api:
        sid = _api_session(api, metadata={"title": "team"})
        [main] = api.get(f"/v1/sessions/{sid}/agents").json()["items"]
    worker = _seed_agent(console, sid, main["agent_id"], "researcher")
    page = sign_in(tab, console)
    _open_session(page, sid, "agents")
    table = page.get_by_role("table", name="Agents of this session")
    rows = table.locator("[data-agent-id]")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("main")
    expect(rows.nth(1)).to_contain_text("researcher")
    expect(table.locator(f'[data-agent-id="{worker}"] [data-agent-status]')).to_have_text("idle")


def test_a_runs_trace_lists_its_steps_in_time_order_with_durations(
    console: Console, tab: Tab
) -> None:
    page = sign_in(tab, console)
    sid = new_session(page, "traced")
    send(page, "write the report")
    expect(page.locator(".msg.assistant", has_text="The report is in")).to_be_visible()
    page.get_by_role("tab", name="Trace").click()
    with console.api() as api:
        [run] = api.get(f"/v1/sessions/{sid}/runs").json()["items"]
        events = api.get(
            f"/v1/sessions/{sid}/events", params={"run_id": run["run_id"], "limit": 1000}
        ).json()["items"]
    table = page.get_by_role("table", name=f"Trace of run {run['run_id']}")
    steps = table.locator("[data-trace-step]")
    expect(steps).to_have_count(len(events))
    shown = steps.evaluate_all("rows => rows.map(r => r.dataset.traceStep)")
    assert shown == [e["event_type"] for e in events]
    durations = table.locator("[data-duration-ms]").evaluate_all(
        "cells => cells.map(c => Number(c.dataset.durationMs))"
    )
    assert all(d >= 0 for d in durations) and durations[0] == 0
    # The model's call of the tool and the tool's run are steps of their own, named.
    expect(table.locator("tr", has_text="model call")).to_have_count(2)
    expect(table.locator("tr", has_text="tool run")).to_contain_text("[tool_result call_write")


def test_the_full_model_context_of_an_answer(console: Console, tab: Tab) -> None:
    page = sign_in(tab, console)
    new_session(page, "context")
    send(page, "alpha")
    expect(page.locator(".msg.assistant", has_text="Echo: alpha")).to_be_visible()
    send(page, "beta")
    expect(page.locator(".msg.assistant", has_text="Echo: beta")).to_be_visible()
    page.get_by_role("tab", name="Tree").click()
    page.locator("button.tree-row", has_text="Echo: beta").click()
    detail = page.locator("[data-node-detail]")
    detail.get_by_role("button", name="Full model context").click()
    context = detail.get_by_role("region", name="Full model context")
    expect(context).to_contain_text("What the model was sent to write this node")
    messages = context.locator(".context-messages > li")
    # What produced "Echo: beta": the whole conversation before it, not counts.
    expect(messages).to_have_text(["useralpha", "assistantEcho: alpha", "userbeta"])


def test_a_tool_call_approved_with_edited_arguments_runs_with_them(
    console: Console, tab: Tab
) -> None:
    page = sign_in(tab, console)
    policy: dict[str, Any] = {"tool_policy": {"default": "allow", "ask": ["write_file"]}}
    sid = new_session(page, "edited", agent_config=policy)
    send(page, "ask before writing")
    card = page.get_by_role("group", name="Permission request")
    card.get_by_role("button", name="Edit arguments").click()
    editor = card.get_by_label("Arguments for write_file (JSON)")
    assert json.loads(editor.input_value()) == {
        "path": "output/approved.txt",
        "content": "approved\n",
    }
    # A value the tool's schema refuses is named, and nothing is decided.
    editor.fill(json.dumps({"path": 5, "content": "x"}))
    card.get_by_role("button", name="Allow with these arguments").click()
    expect(card.get_by_role("alert")).to_contain_text("path")
    editor.fill(json.dumps({"path": "output/edited.txt", "content": "edited by a person\n"}))
    card.get_by_role("button", name="Allow with these arguments").click()
    expect(page.locator(".msg.assistant", has_text="Part two")).to_be_visible()
    with console.api() as api:
        edited = api.get(f"/v1/sessions/{sid}/files/output/edited.txt")
        assert edited.status_code == 200 and edited.text == "edited by a person\n"
        assert api.get(f"/v1/sessions/{sid}/files/output/approved.txt").status_code == 404


def test_memory_history_restores_an_earlier_version(console: Console, tab: Tab) -> None:
    first = "---\nscope: user\n---\n- Likes tea.\n"
    second = "---\nscope: user\n---\n- Likes coffee.\n"
    with console.api() as api:
        read = api.get("/v1/memory/user")
        etag = read.headers.get("etag") or "*"
        put = api.put("/v1/memory/user", json={"content": first}, headers={"If-Match": etag})
        assert put.status_code == 200, put.text
        put = api.put(
            "/v1/memory/user", json={"content": second}, headers={"If-Match": put.headers["etag"]}
        )
        assert put.status_code == 200, put.text
    page = sign_in(tab, console)
    page.get_by_role("link", name="Memory").click()
    editor = page.get_by_label("Contents of user.md")
    expect(editor).to_have_value(re.compile("Likes coffee"))
    page.get_by_role("button", name="History").click()
    versions = page.get_by_role("region", name="Versions of this file")
    restore = versions.get_by_role("button", name="Restore the version of").first
    restore.click()
    expect(page.get_by_role("status").filter(has_text="Restored.").first).to_be_visible()
    expect(editor).to_have_value(re.compile("Likes tea"))
    with console.api() as api:
        assert "Likes tea" in api.get("/v1/memory/user").json()["content"]
