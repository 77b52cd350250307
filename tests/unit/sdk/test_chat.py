"""The chat CLI's rendering: how a run ended is said in full; worker runs show as dim lines."""

from __future__ import annotations

import io

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
    assert describe_end(failed) == (
        "— run failed · end reason: failed · auth_failed: the key was refused"
    )
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
    assert "run failed · end reason: failed · auth_failed: the key was refused" in out.getvalue()


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
