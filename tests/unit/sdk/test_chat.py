"""The chat CLI's rendering: how a run ended is said in full; worker runs show as dim lines."""

from __future__ import annotations

import io
import os

from rich.console import Console

from agent_core.errors import ErrorPayload
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.runtime import RunFinished, RunStatusChanged, RunTextDelta
from soong_agent import Client
from soong_agent.chat import ChatClient, describe_end

SID = "sess_20260101_120000_0123456789abcdef"
PARENT = "run_0123456789abcdef"
CHILD = "run_fedcba9876543210"


def _chat() -> tuple[ChatClient, io.StringIO]:
    out = io.StringIO()
    client = Client("http://gw", "sa_live_x")
    chat = ChatClient(client.session(SID), Console(file=out, width=200))
    chat.last_run = PARENT
    client.close()
    return chat, out


def test_a_failed_or_cancelled_run_says_why() -> None:
    error = ErrorPayload(type="provider_error", code="auth_failed", message="the key was refused")
    failed = RunFinished(
        run_id=PARENT,
        session_id=SID,
        status=RunStatus.FAILED,
        end_reason=EndReason.FAILED,
        error=error,
    )
    # an end reason that only repeats the status is not said twice
    assert describe_end(failed) == "— run failed · auth_failed: the key was refused"
    cancelled = RunFinished(
        run_id=PARENT, session_id=SID, status="cancelled", end_reason="aborted_streaming"
    )
    assert describe_end(cancelled) == "— run cancelled · end reason: aborted_streaming"
    done = RunFinished(run_id=PARENT, session_id=SID, status="completed", end_reason="completed")
    assert describe_end(done) == "— run completed"
    capped = RunFinished(run_id=PARENT, session_id=SID, status="completed", end_reason="max_turns")
    assert describe_end(capped) == "— run completed · end reason: max_turns"

    chat, out = _chat()
    chat.show(failed)
    assert "run failed · auth_failed: the key was refused" in out.getvalue()


def test_a_worker_runs_progress_shows_as_dim_lines_not_its_text() -> None:
    chat, out = _chat()
    common = {"session_id": SID}
    for event in [
        RunTextDelta(run_id=PARENT, turn=1, text="Asking. ", **common),
        RunStatusChanged(run_id=CHILD, status="running", **common),
        RunTextDelta(run_id=CHILD, turn=1, text="worker chatter", **common),
        RunStatusChanged(run_id=CHILD, status="completed", **common),
        RunTextDelta(run_id=PARENT, turn=1, text="Done.", **common),
    ]:
        chat.show(event)
    text = out.getvalue()
    assert "worker chatter" not in text
    assert f"⤷ worker run {CHILD} running" in text and f"⤷ worker run {CHILD} completed" in text
    assert text.index("Asking.") < text.index("completed") < text.index("Done.")


def test_slash_skills_lists_them_and_other_slash_words_are_messages() -> None:
    import httpx

    body = {
        "items": [
            {"name": "charts", "description": "Draw charts.", "source": "user",
             "model_invocable": True, "allowed_tools": None},
            {"name": "deploy", "description": "Deploy.", "source": "project",
             "model_invocable": False, "allowed_tools": ["run_command"]},
        ],
        "problems": [
            {"source": "user", "path": "broken/SKILL.md", "code": "invalid_yaml",
             "reason": "the frontmatter is not valid YAML (line 3)", "name": "broken"},
        ],
    }  # fmt: skip
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json=body)

    out = io.StringIO()
    with Client("http://gw", "sa_live_x", transport=httpx.MockTransport(handler)) as client:
        chat = ChatClient(client.session(SID), Console(file=out, width=200))
        assert chat.is_command("/skills") and chat.is_command("/tree")
        assert not chat.is_command("/charts draw a bar chart")  # a message invoking a skill
        assert not chat.is_command("hello")
        assert chat.command("/skills")
    assert seen == [f"/v1/sessions/{SID}/skills"]
    text = out.getvalue()
    assert "/charts  [user]  Draw charts." in text
    assert "/deploy  [project]  Deploy.  (only you can invoke it)" in text
    assert "skipped user broken/SKILL.md: the frontmatter is not valid YAML (line 3)" in text


def _answering(routes: dict[str, object]) -> tuple[Client, list[str]]:
    import httpx

    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        return httpx.Response(200, json=routes[request.url.path])

    return Client("http://gw", "sa_live_x", transport=httpx.MockTransport(handler)), seen


def _tree_node(node_id: str, seq: int, parent: str | None, role: str, preview: str) -> dict:
    return {"node_id": node_id, "node_seq": seq, "parent_id": parent, "agent_id": "agent_root",
            "role": role, "node_type": "message", "preview": preview}  # fmt: skip


def test_slash_tree_draws_branches_under_their_parent_and_marks_the_active_path() -> None:
    n = [f"node_{i:016x}" for i in range(5)]
    tree = {
        "session_id": SID,
        "active_node_id": n[4],
        "nodes": [
            _tree_node(n[0], 0, None, "user", "hi"),
            _tree_node(n[1], 1, n[0], "assistant", "first answer"),
            _tree_node(n[2], 2, n[1], "user", "old question"),
            _tree_node(n[3], 3, n[1], "user", "new question"),
            _tree_node(n[4], 4, n[3], "assistant", "new answer"),
        ],
    }
    client, _ = _answering({f"/v1/sessions/{SID}/tree": tree})
    out = io.StringIO()
    with client:
        ChatClient(client.session(SID), Console(file=out, width=200)).command("/tree")
    lines = out.getvalue().splitlines()
    assert lines == [
        f"* {n[0]} user      hi",
        f"* └─ {n[1]} assistant first answer",
        f"     ├─ {n[2]} user      old question",
        f"*    └─ {n[3]} user      new question",
        f">       └─ {n[4]} assistant new answer",
    ]


def test_slash_runs_and_files_say_what_there_is_once_each() -> None:
    run = {"run_id": PARENT, "session_id": SID, "agent_id": "agent_root", "status": "completed",
           "end_reason": "completed", "created_at": "2026-01-01T12:00:00Z"}  # fmt: skip
    failed = {**run, "run_id": CHILD, "status": "failed", "end_reason": "max_turns"}
    routes = {
        f"/v1/sessions/{SID}/runs": {"items": [run, failed]},
        f"/v1/sessions/{SID}/files": {"items": []},
    }
    client, seen = _answering(routes)
    out = io.StringIO()
    with client:
        chat = ChatClient(client.session(SID), Console(file=out, width=200))
        chat.command("/runs")
        chat.command("/files")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(PARENT) and lines[0].endswith("  completed")  # not twice
    assert lines[1].endswith("  failed · end reason: max_turns")
    assert lines[2].startswith("no files yet")
    assert seen[-1] == f"GET /v1/sessions/{SID}/files"  # every area, uploads included


def test_a_refused_tool_call_says_why() -> None:
    from agent_core.types.runtime import RunToolResult

    chat, out = _chat()
    refused = RunToolResult(
        run_id=PARENT,
        session_id=SID,
        tool_call_id="call_1",
        name="run_python",
        is_error=True,
        content=[{"type": "text", "text": "denied: the policy asks before run_python\nmore"}],
    )
    chat.show(refused)
    assert "✗ run_python: denied: the policy asks before run_python" in out.getvalue()
    assert "more" not in out.getvalue()


def test_cancel_typed_while_a_run_streams_reaches_the_run_at_once() -> None:
    import threading

    from soong_agent.chat import LineReader

    read, write = os.pipe()
    with os.fdopen(read) as source, os.fdopen(write, "w") as typed:
        lines = LineReader(source)
        cancelled = threading.Event()
        lines.on_cancel = cancelled.set  # as while a run streams
        typed.write("next question\n/cancel\n")
        typed.flush()
        assert cancelled.wait(30)  # not queued behind the answer
        assert lines.next() == "next question"  # other lines wait their turn, in order
        lines.on_cancel = None  # the run ended: /cancel is a command again
        typed.write("/cancel\n")
        typed.flush()
        assert lines.next() == "/cancel"
    assert lines.next() is None


def test_every_chat_error_is_one_line_with_its_code() -> None:
    from soong_agent import NotFoundError
    from soong_agent.chat import error_line

    api = NotFoundError(404, "not_found", "no session sess_x", None)
    assert error_line(api) == "error: no session sess_x [not_found]"
    assert error_line(ValueError("no API key: set SOONG_API_KEY")).endswith("[invalid_input]")
