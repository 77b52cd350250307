"""``soong-agent chat``: a terminal client of the gateway, built on the SDK's :class:`Client`.

Creates or resumes a session, streams each answer token by token, shows tool calls as they start
and finish, says how each run ended (status, end reason, error code and message), asks about
tool calls waiting for permission, and offers ``/tree``, ``/switch_node ID``, ``/cancel``,
``/files``, ``/runs``, ``/skills``. Any other ``/word`` line is sent as a message: ``/<skill>``
invokes that skill. The SDK's stream resumes a dropped connection with ``Last-Event-ID``, so no
text is lost or printed twice; Ctrl-C during an answer cancels its run.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.markup import escape

from agent_core.types.runtime import (
    RunError,
    RunFinished,
    RunPermissionRequested,
    RunStatusChanged,
    RunTextDelta,
    RunToolResult,
    RunToolStarted,
)
from soong_agent._errors import APIError, SoongError, StreamLostError
from soong_agent._sse import StreamEvent
from soong_agent._sync import Client, Session

__all__ = ["ChatClient", "add_parser", "describe_end", "run"]

# The chat's own commands; any other ``/word`` line is a message (``/<skill>`` invokes a skill).
_COMMANDS = frozenset(
    {"tree", "switch_node", "cancel", "files", "runs", "skills", "help", "quit", "exit"}
)


def add_parser(subparsers: Any) -> None:
    """Register ``chat`` on the CLI's subparsers."""
    chat = subparsers.add_parser("chat", help="chat with an agent through a gateway")
    chat.add_argument("--url", default=None, help="gateway URL (default $SOONG_GATEWAY_URL)")
    chat.add_argument("--key", default=None, help="API key (default $SOONG_API_KEY)")
    chat.add_argument("--session", default=None, help="resume this session id")
    chat.add_argument(
        "--assistant", default=None, help="start the session from this named agent (assistant)"
    )


def describe_end(finished: RunFinished) -> str:
    """One line saying how a run ended: status, and for anything but a plain completion the end
    reason and the error's code and message."""
    status = finished.status.value
    line = f"— run {status}"
    reason = finished.end_reason.value if finished.end_reason is not None else None
    if reason is not None and (status, reason) != ("completed", "completed"):
        line += f" · end reason: {reason}"
    if finished.error is not None:
        line += f" · {finished.error.code}: {finished.error.message}"
    return line


class ChatClient:
    """One interactive session against a gateway."""

    def __init__(self, session: Session, console: Console) -> None:
        self.session = session
        self.console = console
        self.last_run: str | None = None
        self._attempts: dict[str, int] = {}  # the attempt whose text is on screen, per run

    def _print(self, text: str, **kw: Any) -> None:
        self.console.print(text, markup=False, highlight=False, **kw)

    def _error(self, exc: SoongError) -> None:
        if isinstance(exc, APIError):
            self.console.print(f"[red]error {exc.status} {exc.code}: {escape(exc.message)}[/red]")
        else:
            self.console.print(f"[red]error: {escape(str(exc))}[/red]")

    def send(self, text: str) -> None:
        """Send a message and stream its run to the end (Ctrl-C cancels the run)."""
        stream = self.session.send(text)
        try:
            with stream:
                self.last_run = stream.run_id
                for event in stream:
                    self.show(event)
        except KeyboardInterrupt:
            self.cancel()
        except StreamLostError:
            self.console.print("[red]lost the event stream; see /runs[/red]")
        except SoongError as exc:
            self._error(exc)

    def show(self, event: StreamEvent) -> None:
        """Render one event of the run being followed."""
        if event.run_id not in (None, self.last_run):
            self._show_child(event)
            return
        if isinstance(event, RunTextDelta):
            shown = self._attempts.setdefault(event.run_id, event.attempt)
            if event.attempt > shown:  # taken over: the turn's text starts again from its offset
                self._attempts[event.run_id] = event.attempt
                self.console.print(
                    f"\n[dim]— the run's worker was lost; attempt {event.attempt} "
                    "streams the answer again —[/dim]"
                )
            self._print(event.text, end="", soft_wrap=True)
        elif isinstance(event, RunToolStarted):
            args = json.dumps(event.arguments)[:80]
            self.console.print(f"\n[cyan]⚙ {escape(event.name)}({escape(args)})[/cyan]")
        elif isinstance(event, RunToolResult):
            mark = "[red]✗[/red]" if event.is_error else "[green]✓[/green]"
            self.console.print(f"{mark} {escape(event.name)}")
        elif isinstance(event, RunPermissionRequested):
            self._decide(event)
        elif isinstance(event, RunError):
            self.console.print(
                f"\n[red]! {escape(event.error.code)}: {escape(event.error.message)}[/red]"
            )
        elif isinstance(event, RunFinished):
            style = "dim" if event.status.value == "completed" else "red"
            self.console.print(f"\n[{style}]{escape(describe_end(event))}[/{style}]")

    def _show_child(self, event: StreamEvent) -> None:
        """A worker's run (``dispatch_worker``) streams into its parent's: its starts and ends
        are shown, one dim line each, not its text (workers running together would interleave);
        a permission it asks for is asked like the parent's."""
        if isinstance(event, RunStatusChanged):
            self.console.print(f"\n[dim]  ⤷ worker run {event.run_id} {event.status.value}[/dim]")
        elif isinstance(event, RunPermissionRequested):
            self._decide(event)

    def _decide(self, event: RunPermissionRequested) -> None:
        call = event.request.tool_call
        answer = self.console.input(f"\n[yellow]allow {escape(call.name)}? [y/N][/yellow] ")
        behavior = "allow" if answer.strip().lower() in ("y", "yes") else "deny"
        try:
            self.session.decide(event.request.request_id, behavior)
        except SoongError as exc:
            self._error(exc)

    def cancel(self) -> None:
        """Cancel the last run and wait until it ended."""
        if self.last_run is None:
            self.console.print("no run to cancel")
            return
        try:
            state = self.session.run(self.last_run).cancel(wait=True)
        except SoongError as exc:
            self._error(exc)
            return
        self.console.print(f"[dim]run {state.run_id} is {state.status.value}[/dim]")

    @staticmethod
    def is_command(line: str) -> bool:
        """Whether ``line`` is one of the chat's own commands (else it is a message: ``/<skill>``
        invokes a skill)."""
        return line.startswith("/") and line[1:].partition(" ")[0] in _COMMANDS

    def command(self, line: str) -> bool:
        """Run one slash command; ``False`` means quit."""
        name, _, arg = line[1:].partition(" ")
        if name in ("quit", "exit"):
            return False
        try:
            self._command(name, arg.strip())
        except SoongError as exc:
            self._error(exc)
        return True

    def _command(self, name: str, arg: str) -> None:
        if name == "tree":
            tree = self.session.tree()
            for node in tree.nodes:
                active = "*" if node.node_id == tree.active_node_id else " "
                self._print(
                    f"{active} {node.node_id} ← {node.parent_id or '-'} "
                    f"{node.role.value:9} {_kind(node.node_type)}{node.preview}"
                )
        elif name == "switch_node":
            self.session.switch_node(arg)
            self._print(f"active node: {arg}")
        elif name == "cancel":
            self.cancel()
        elif name == "files":
            for area in ("input", "output"):
                for f in self.session.files(area):
                    self._print(f"{f.path}  {f.size_bytes} B")
        elif name == "runs":
            for r in self.session.runs():
                reason = r.end_reason.value if r.end_reason else ""
                error = f" {r.error.code}: {r.error.message}" if r.error else ""
                self._print(f"{r.run_id}  {r.status.value}  {reason}{error}")
        elif name == "skills":
            self._skills()
        else:
            self.console.print(
                "commands: /tree /switch_node ID /cancel /files /runs /skills /quit "
                "(/compact summarizes the older conversation; /<skill> ... sends a message "
                "invoking that skill)"
            )

    def _skills(self) -> None:
        """The session's skills (``/name`` invokes one) and the skill files that were skipped."""
        listing = self.session.skills()
        if not listing.items:
            self._print("no skills in effect")
        for s in listing.items:
            who = "" if s.model_invocable else "  (only you can invoke it)"
            self._print(f"/{s.name}  [{s.source.value}]  {s.description}{who}")
        for p in listing.problems:
            self._print(f"skipped {p.source.value} {p.path}: {p.reason} [{p.code.value}]")


def run(args: argparse.Namespace) -> int:
    """The chat loop; returns the exit code."""
    console = Console()
    try:
        client = Client(args.url, args.key, max_retries=2)
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        return 2
    with client:
        try:
            if args.session:
                session = client.session(args.session)
                session.get()
            else:
                session = client.create_session(assistant=args.assistant)
        except SoongError as exc:
            message = exc.message if isinstance(exc, APIError) else str(exc)
            console.print(f"[red]{escape(message)}[/red]")
            return 1
        chat = ChatClient(session, console)
        console.print(f"[dim]session {session.id} — /help for commands[/dim]")
        while True:
            try:
                line = console.input("[bold]> [/bold]").strip()
            except (EOFError, KeyboardInterrupt):
                return 0
            if not line:
                continue
            if chat.is_command(line):
                if not chat.command(line):
                    return 0
            else:
                chat.send(line)


def _kind(node_type: str) -> str:
    """A node's type where it is not a plain message (a compaction, injected context, …)."""
    return "" if node_type == "message" else f"[{node_type}] "
