"""``soong-agent chat``: a terminal client of the gateway, built on the SDK's :class:`Client`.

Creates or resumes a session (a resumed one shows its conversation so far), streams each answer
token by token, shows tool calls as they start and finish (a refused or failed one with its
reason), says how each run ended (status, end reason, error code and message), asks about tool
calls waiting for permission, and offers ``/tree`` (drawn as a tree), ``/switch_node ID``,
``/regenerate [ID]`` (answer the last message, or that node's, again), ``/cancel``, ``/files``, ``/runs``, ``/skills``. Any other ``/word`` line is sent as a message:
``/<skill>`` invokes that skill. The SDK's stream resumes a dropped connection with
``Last-Event-ID``, so no text is lost or printed twice.

Input is read by a thread of its own, so the chat listens while an answer streams: ``/cancel``
(or Ctrl-C) cancels the run at once, and any other line typed meanwhile waits its turn. Every
error is one line, ``error: … [code]``.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape

from agent_core.types.api import Tree, TreeNode
from agent_core.types.runtime import (
    Node,
    RunError,
    RunFinished,
    RunPermissionRequested,
    RunState,
    RunStatusChanged,
    RunTextDelta,
    RunToolResult,
    RunToolStarted,
)
from soong_agent._errors import APIError, SoongError, StreamLostError
from soong_agent._sse import StreamEvent
from soong_agent._sync import Client, Session

__all__ = ["ChatClient", "describe_end", "run"]

# The chat's own commands; any other ``/word`` line is a message (``/<skill>`` invokes a skill).
_COMMANDS = frozenset(
    {
        "tree",
        "switch_node",
        "regenerate",
        "cancel",
        "files",
        "runs",
        "skills",
        "help",
        "quit",
        "exit",
    }
)
# How much of a resumed conversation is shown, and of a failed tool's reason.
_HISTORY_NODES = 20
_REASON_CHARS = 200


class LineReader:
    """Lines of ``source`` read by a daemon thread as they are typed, handed out in order;
    ``None`` at its end. While a run streams, ``/cancel`` goes to ``on_cancel`` at once instead
    of waiting behind the answer."""

    def __init__(self, source: TextIO) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._source = source
        self.on_cancel: Any = None  # set while a run streams: called (from the thread) on /cancel
        threading.Thread(target=self._read, name="chat-input", daemon=True).start()

    def _read(self) -> None:
        for raw in self._source:
            line = raw.strip()
            hook = self.on_cancel
            if hook is not None and line == "/cancel":
                hook()
                continue
            self._lines.put(line)
        self._lines.put(None)

    def next(self) -> str | None:
        """The next line (blocking), or ``None`` once the input ended."""
        return self._lines.get()


def describe_end(finished: RunFinished) -> str:
    """One line saying how a run ended: status, and for anything but a plain completion the end
    reason and the error's code and message."""
    return f"— run {_outcome(finished)}"


def _outcome(run: RunFinished | RunState) -> str:
    """Status, then the end reason where it says more than the status, then the error."""
    status = run.status.value
    line = status
    reason = run.end_reason.value if run.end_reason is not None else None
    if reason is not None and reason != status:
        line += f" · end reason: {reason}"
    if run.error is not None:
        line += f" · {run.error.code}: {run.error.message}"
    return line


def error_line(exc: BaseException) -> str:
    """The one line every chat error prints: ``error: … [code]``."""
    if isinstance(exc, APIError):
        return f"error: {exc.message} [{exc.code}]"
    if isinstance(exc, StreamLostError):
        return f"error: {exc} [stream_lost]"
    if isinstance(exc, SoongError):
        return f"error: {exc} [transport]"
    return f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__} [invalid_input]"


def tree_lines(tree: Tree) -> Iterator[str]:
    """The tree drawn as one, children under their parent in order, the active path marked
    ``*`` (a node of it) and its end ``>``."""
    children: dict[str | None, list[TreeNode]] = {}
    known = {n.node_id for n in tree.nodes}
    for node in sorted(tree.nodes, key=lambda n: n.node_seq):
        parent = node.parent_id if node.parent_id in known else None
        children.setdefault(parent, []).append(node)
    by_id = {n.node_id: n for n in tree.nodes}
    active: set[str] = set()
    at = tree.active_node_id
    while at is not None and at in by_id and at not in active:
        active.add(at)
        at = by_id[at].parent_id

    def walk(parent: str | None, indent: str) -> Iterator[str]:
        kids = children.get(parent, [])
        for i, node in enumerate(kids):
            last = i == len(kids) - 1
            branch = "" if parent is None else ("└─ " if last else "├─ ")
            mark = (
                ">"
                if node.node_id == tree.active_node_id
                else ("*" if node.node_id in active else " ")
            )
            yield (
                f"{mark} {indent}{branch}{node.node_id} {node.role.value:9} "
                f"{_kind(node.node_type)}{node.preview}"
            )
            deeper = indent if parent is None else indent + ("   " if last else "│  ")
            yield from walk(node.node_id, deeper)

    yield from walk(None, "")


def _text_of(node: Node) -> str:
    return "".join(getattr(b, "text", "") for b in node.content if b.type == "text")


def _reason(result: RunToolResult) -> str:
    """Why a tool call failed or was refused: the first line of its text, shortened."""
    text = " ".join(getattr(b, "text", "") for b in result.content if b.type == "text").strip()
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= _REASON_CHARS else line[: _REASON_CHARS - 1] + "…"


class ChatClient:
    """One interactive session against a gateway."""

    def __init__(self, session: Session, console: Console, lines: LineReader | None = None) -> None:
        self.session = session
        self.console = console
        self.lines = lines
        self.last_run: str | None = None
        self._attempts: dict[str, int] = {}  # the attempt whose text is on screen, per run

    def _print(self, text: str, **kw: Any) -> None:
        self.console.print(text, markup=False, highlight=False, **kw)

    def _error(self, exc: BaseException) -> None:
        self.console.print(f"[red]{escape(error_line(exc))}[/red]")

    def show_history(self, limit: int = _HISTORY_NODES) -> None:
        """The conversation so far along the active path (its last ``limit`` messages): what a
        resumed session shows before the prompt."""
        nodes = [n for n in self.session.path().items if n.node_type.value == "message"]
        if not nodes:
            return
        if len(nodes) > limit:
            self.console.print(f"[dim]… {len(nodes) - limit} earlier messages (/tree)[/dim]")
        for node in nodes[-limit:]:
            text = _text_of(node)
            calls = [b.name for b in node.content if b.type == "tool_call"]
            if node.role.value == "user":
                self.console.print(f"[bold]> [/bold]{escape(text)}")
            elif node.role.value == "assistant":
                if text:
                    self._print(text)
                for name in calls:
                    self.console.print(f"[cyan]⚙ {escape(name)}[/cyan]")
        self.console.print("[dim]— conversation so far —[/dim]")

    def send(self, text: str) -> None:
        """Send a message and stream its run to the end; ``/cancel`` typed meanwhile (or
        Ctrl-C) cancels the run."""
        stream = self.session.send(text)
        try:
            with stream:
                self.last_run = stream.run_id
                if self.lines is not None:
                    self.lines.on_cancel = self._cancel_now
                try:
                    for event in stream:
                        self.show(event)
                finally:
                    if self.lines is not None:
                        self.lines.on_cancel = None
        except KeyboardInterrupt:
            self.cancel()
        except SoongError as exc:
            self._error(exc)

    def regenerate(self, node_id: str | None) -> None:
        """Answer a message again (the active node's turn by default) and stream the new run;
        the earlier answer stays in the tree (``/tree``)."""
        target = node_id or self.session.get().active_node_id
        if target is None:
            self.console.print("nothing to answer again yet")
            return
        accepted = self.session.regenerate(target)
        self.last_run = accepted.run_id
        for event in self.session.run(accepted.run_id).events():
            self.show(event)

    def _cancel_now(self) -> None:
        """``/cancel`` typed while the run streams (from the input thread): ask for the cancel;
        the stream then ends with the run's end, said as usual."""
        run_id = self.last_run
        if run_id is None:
            return
        self.console.print("\n[dim]cancelling …[/dim]")
        try:
            self.session.run(run_id).cancel()
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
            if event.is_error:
                why = _reason(event)
                self.console.print(
                    f"[red]✗[/red] {escape(event.name)}" + (f": {escape(why)}" if why else "")
                )
            else:
                self.console.print(f"[green]✓[/green] {escape(event.name)}")
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
        question = f"\n[yellow]allow {escape(call.name)}? [y/N][/yellow] "
        if self.lines is None:
            answer: str | None = self.console.input(question)
        else:
            self.console.print(question, end="")
            answer = self.lines.next()
        behavior = "allow" if (answer or "").strip().lower() in ("y", "yes") else "deny"
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
            for line in tree_lines(self.session.tree()):
                self._print(line)
        elif name == "switch_node":
            self.session.switch_node(arg)
            self._print(f"active node: {arg}")
        elif name == "regenerate":
            self.regenerate(arg or None)
        elif name == "cancel":
            self.cancel()
        elif name == "files":
            files = self.session.files()
            if not files:
                self._print("no files yet (upload to input/ with the API, or ask the agent)")
            for f in files:
                when = f.modified_at.astimezone().strftime("%Y-%m-%d %H:%M")
                self._print(f"{f.path}  {f.size_bytes} B  {when}")
        elif name == "runs":
            runs = self.session.runs()
            if not runs:
                self._print("no runs yet")
            for r in runs:
                when = r.created_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
                self._print(f"{r.run_id}  {when}  {_outcome(r)}")
        elif name == "skills":
            self._skills()
        else:
            self.console.print(
                "commands: /tree /switch_node ID /regenerate [ID] /cancel /files /runs /skills "
                "/quit "
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


def run(args: argparse.Namespace, source: TextIO | None = None) -> int:
    """The chat loop over ``source`` (standard input); returns the exit code."""
    console = Console()
    try:
        client = Client(args.url, args.key, max_retries=2)
    except ValueError as exc:  # no URL or no key
        print(error_line(exc), file=sys.stderr)
        return 2
    with client:
        try:
            if args.session:
                session = client.session(args.session)
                session.get()
            else:
                session = client.create_session(assistant=args.assistant)
        except SoongError as exc:
            print(error_line(exc), file=sys.stderr)
            return 1
        lines = LineReader(source or sys.stdin)
        chat = ChatClient(session, console, lines)
        if args.session:
            try:
                chat.show_history()
            except SoongError as exc:
                chat._error(exc)
        console.print(f"[dim]session {session.id} — /help for commands[/dim]")
        return _loop(chat, console, lines)


def _loop(chat: ChatClient, console: Console, lines: LineReader) -> int:
    while True:
        console.print("[bold]> [/bold]", end="")
        try:
            line = lines.next()
        except KeyboardInterrupt:
            return 0
        if line is None:
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
