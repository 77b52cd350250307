"""``soong-agent chat``: a terminal client of the gateway.

Creates or resumes a session, streams each answer token by token, shows tool calls as they start
and finish and runs as they end, asks about tool calls waiting for permission, and offers
``/tree``, ``/switch_node ID``, ``/cancel``, ``/files``, ``/runs``. A dropped event stream is
reopened with ``Last-Event-ID``, so no text is lost or printed twice.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from rich.console import Console

__all__ = ["ChatClient", "add_parser", "follow_run", "run"]

Event = tuple[str, str, dict[str, Any]]  # (id, event type, data)
_RECONNECT_ATTEMPTS = 20


def add_parser(subparsers: Any) -> None:
    """Register ``chat`` on the CLI's subparsers."""
    chat = subparsers.add_parser("chat", help="chat with an agent through a gateway")
    chat.add_argument("--url", default=None, help="gateway URL (default $SOONG_GATEWAY_URL)")
    chat.add_argument("--key", default=None, help="API key (default $SOONG_API_KEY)")
    chat.add_argument("--session", default=None, help="resume this session id")


def _frames(lines: Iterator[str]) -> Iterator[Event]:
    fields: dict[str, str] = {}
    for line in lines:
        if not line:
            if "data" in fields and "id" in fields:
                yield fields["id"], fields.get("event", "message"), json.loads(fields["data"])
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value


def follow_run(
    client: httpx.Client,
    session_id: str,
    run_id: str,
    on_event: Callable[[Event], None],
    *,
    attempts: int = _RECONNECT_ATTEMPTS,
    backoff_s: float = 0.5,
) -> str | None:
    """Deliver every event of the run once, in order, reconnecting after drops.

    Returns the terminal status, or ``None`` when the stream could not be reopened.
    """
    last_id: str | None = None
    url = f"/v1/sessions/{session_id}/runs/{run_id}/events"
    for attempt in range(attempts):
        headers = {"Last-Event-ID": last_id} if last_id else {}
        try:
            with client.stream("GET", url, headers=headers, timeout=None) as response:
                if response.status_code != 200:
                    response.read()
                    raise httpx.HTTPStatusError(
                        "stream refused", request=response.request, response=response
                    )
                for event in _frames(response.iter_lines()):
                    last_id = event[0]
                    on_event(event)
                    if event[1] == "run_finished" and event[2].get("run_id") == run_id:
                        return str(event[2].get("status"))
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code < 500 and exc.response.status_code != 429:
                raise
        except httpx.TransportError:
            pass
        time.sleep(backoff_s * min(attempt + 1, 4))
    return None


class ChatClient:
    """One interactive session against a gateway."""

    def __init__(self, client: httpx.Client, console: Console, session_id: str) -> None:
        self.client = client
        self.console = console
        self.session_id = session_id
        self.last_run: str | None = None

    def _api(self, method: str, path: str, **kw: Any) -> Any:
        response = self.client.request(method, f"/v1/sessions/{self.session_id}{path}", **kw)
        if response.status_code >= 400:
            error = response.json().get("error", {})
            self.console.print(f"[red]error {response.status_code}: {error.get('message')}[/red]")
            return None
        return response.json()

    def send(self, text: str) -> None:
        """Post a message and stream its run to the end (Ctrl-C cancels the run)."""
        posted = self._api("POST", "/messages", json={"text": text})
        if posted is None:
            return
        self.last_run = posted["run_id"]
        try:
            status = follow_run(self.client, self.session_id, posted["run_id"], self._show)
        except KeyboardInterrupt:
            self.cancel()
            return
        if status is None:
            self.console.print("[red]lost the event stream; see /runs[/red]")

    def _show(self, event: Event) -> None:
        _, kind, data = event
        if data.get("run_id") not in (None, self.last_run):
            self._show_child(kind, data)
            return
        if kind == "text_delta":
            self.console.print(data["text"], end="", markup=False, highlight=False, soft_wrap=True)
        elif kind == "tool_started":
            args = json.dumps(data.get("arguments", {}))[:80]
            self.console.print(f"\n[cyan]⚙ {data['name']}({args})[/cyan]", highlight=False)
        elif kind == "tool_result":
            mark = "[red]✗[/red]" if data.get("is_error") else "[green]✓[/green]"
            self.console.print(f"{mark} {data['name']}")
        elif kind == "permission_requested":
            self._decide(data["request"])
        elif kind == "run_finished":
            reason = data.get("end_reason") or ""
            self.console.print(f"\n[dim]— run {data['status']} {reason}[/dim]")

    def _show_child(self, kind: str, data: dict[str, Any]) -> None:
        """A worker's run (``dispatch_worker``) streams into its parent's: its starts and ends
        are shown, one dim line each, not its text (workers running together would interleave);
        a permission it asks for is asked like the parent's."""
        if kind == "run_status_changed":
            self.console.print(
                f"\n[dim]  ⤷ worker run {data['run_id']} {data['status']}[/dim]", highlight=False
            )
        elif kind == "permission_requested":
            self._decide(data["request"])

    def _decide(self, request: dict[str, Any]) -> None:
        call = request["tool_call"]
        answer = self.console.input(f"\n[yellow]allow {call['name']}? [y/N][/yellow] ")
        behavior = "allow" if answer.strip().lower() in ("y", "yes") else "deny"
        self._api("POST", f"/permissions/{request['request_id']}", json={"behavior": behavior})

    def cancel(self) -> None:
        """Cancel the last run and wait until it ended."""
        if self.last_run is None:
            self.console.print("no run to cancel")
            return
        run = self._api("POST", f"/runs/{self.last_run}/cancel", params={"wait": "true"})
        if run is not None:
            self.console.print(f"[dim]run {run['run_id']} is {run['status']}[/dim]")

    def command(self, line: str) -> bool:
        """Run one slash command; ``False`` means quit."""
        name, _, arg = line[1:].partition(" ")
        if name in ("quit", "exit"):
            return False
        if name == "tree":
            tree = self._api("GET", "/tree") or {"nodes": []}
            for node in tree["nodes"]:
                active = "*" if node["node_id"] == tree.get("active_node_id") else " "
                self.console.print(
                    f"{active} {node['node_id']} ← {node['parent_id'] or '-'} "
                    f"{node['role']:9} {node['preview']}",
                    markup=False,
                )
        elif name == "switch_node":
            if self._api("POST", "/switch_node", json={"node_id": arg.strip()}) is not None:
                self.console.print(f"active node: {arg.strip()}")
        elif name == "cancel":
            self.cancel()
        elif name == "files":
            for area in ("input", "output"):
                files = self._api("GET", "/files", params={"area": area}) or {"items": []}
                for f in files["items"]:
                    self.console.print(f"{f['path']}  {f['size_bytes']} B", markup=False)
        elif name == "runs":
            runs = self._api("GET", "/runs") or {"items": []}
            for r in runs["items"]:
                self.console.print(f"{r['run_id']}  {r['status']}  {r.get('end_reason') or ''}")
        else:
            self.console.print("commands: /tree /switch_node ID /cancel /files /runs /quit")
        return True


def run(args: argparse.Namespace) -> int:
    """The chat loop; returns the exit code."""
    console = Console()
    url = args.url or os.environ.get("SOONG_GATEWAY_URL") or "http://127.0.0.1:8720"
    key = args.key or os.environ.get("SOONG_API_KEY")
    if not key:
        console.print("[red]give an API key with --key or $SOONG_API_KEY[/red]")
        return 2
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        if args.session:
            response = client.get(f"/v1/sessions/{args.session}")
        else:
            response = client.post("/v1/sessions", json={})
        if response.status_code >= 400:
            console.print(f"[red]{response.json().get('error', {}).get('message')}[/red]")
            return 1
        chat = ChatClient(client, console, response.json()["session_id"])
        console.print(f"[dim]session {chat.session_id} — /help for commands[/dim]")
        while True:
            try:
                line = console.input("[bold]> [/bold]").strip()
            except (EOFError, KeyboardInterrupt):
                return 0
            if not line:
                continue
            if line.startswith("/"):
                if not chat.command(line):
                    return 0
            else:
                chat.send(line)
