"""The SDK against a real stack (scripted model) started by its own local mode: every resource,
typed errors, the event iterator across a gateway restart, rate limiting, and a clean stop.

The tests run in file order on one stack; the last one stops it and checks nothing is left.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

import soong_agent
from agent_core.types.enums import Role, RunStatus, SessionStatus
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import RunFinished, RunPermissionRequested, RunTextDelta
from soong_agent import (
    ConflictError,
    NotFoundError,
    PreconditionFailedError,
    RateLimitedError,
    ValidationError,
)
from tests.e2e.sdk.conftest import SdkStack

pytestmark = pytest.mark.e2e

ASK_LOOKUP = {"tool_policy": {"ask": ["lookup"]}}


async def test_sessions_messages_runs_and_the_tree(sdk: SdkStack) -> None:
    c = sdk.client
    s = await c.create_session(metadata={"title": "sdk"}, agent_config={"max_turns": 4})
    assert (await s.get()).metadata["title"] == "sdk"
    assert (await c.list_sessions(limit=1)).items[0].session_id == s.id  # newest first
    other = await c.create_session()
    listed = [x.session_id async for x in c.iter_sessions(page_size=1)]
    assert listed[:2] == [other.id, s.id]
    assert (await s.update(metadata={"title": "renamed"})).metadata["title"] == "renamed"

    stream = s.send("hello sdk")
    events = [e async for e in stream]
    assert events[-1] is stream.finished and stream.finished is not None
    assert stream.finished.status is RunStatus.COMPLETED and stream.run_id is not None
    assert "[fake model]" in stream.text
    assert [(u.name, u.is_error, u.result is not None) for u in stream.tool_uses] == [
        ("lookup", False, True)
    ]
    deltas = "".join(e.text for e in events if isinstance(e, RunTextDelta))
    assert deltas == stream.text  # the streamed text is the answer, once

    tree = await s.tree()
    answer = await s.node(tree.nodes[-1].node_id)
    assert answer.role is Role.ASSISTANT and answer.node_id == tree.active_node_id
    assert "".join(b.text for b in answer.content if isinstance(b, TextBlock)) == stream.text
    report = await s.context(answer.node_id)
    assert report.node_ids[-1] == answer.node_id
    first_user = await s.node(next(n for n in tree.nodes if n.role is Role.USER).node_id)
    with pytest.raises(ValidationError) as refused:  # two user messages in a row: no
        await s.switch_node(first_user.node_id)
    assert refused.value.code == "invalid_parent"
    assert (await s.switch_node(answer.node_id)).active_node_id == answer.node_id

    accepted = await s.regenerate(answer.node_id)  # the first message, answered again
    run = s.run(accepted.run_id)
    finished = await run.wait()
    assert isinstance(finished, RunFinished) and finished.status is RunStatus.COMPLETED
    assert (await run.get()).status is RunStatus.COMPLETED
    assert (await run.cancel()).status is RunStatus.COMPLETED  # a terminal run stays as it was
    assert [r.run_id for r in await s.runs()] == [stream.run_id, accepted.run_id]
    branched = await s.node(accepted.node_id)
    assert branched.parent_id == first_user.parent_id and branched.content == first_user.content
    assert {n.node_id for n in (await s.tree()).nodes} >= {answer.node_id, accepted.node_id}

    assert await s.send("helpers").final_text() == stream.text
    calls = await s.send("tools").tool_calls()
    assert [c.name for c in calls] == ["lookup"] and calls[0].arguments == {"q": "tools"}
    replay = [e async for e in run.events()]  # a finished run's stream, from the start
    assert isinstance(replay[-1], RunFinished) and replay[-1].run_id == run.id

    timeline = await s.all_timeline()
    page = await s.timeline(limit=2)
    assert [e.seq for e in page.items] == [e.seq for e in timeline[:2]]
    assert page.next_after_seq == timeline[1].seq
    assert {e.run_id for e in await s.all_timeline(run_id=run.id)} == {run.id}
    assert [a.agent_type.value for a in await s.agents()] == ["main"]

    assert (await s.archive()).status is SessionStatus.ARCHIVED
    with pytest.raises(ConflictError) as archived:
        await s.post("refused")
    assert archived.value.code == "session_archived"
    assert (await s.unarchive()).status is SessionStatus.ACTIVE


async def test_files_artifacts_tasks_and_memory(sdk: SdkStack, tmp_path: Path) -> None:
    c = sdk.client
    s = await c.create_session()
    up = await s.upload("data.csv", b"a,b\n1,2\n")
    assert (up.path, up.size_bytes) == ("input/data.csv", 8)
    local_file = tmp_path / "notes.txt"
    local_file.write_text("notes")
    assert (await s.upload("notes.txt", local_file)).size_bytes == 5
    assert sorted(f.path for f in await s.files("input")) == ["input/data.csv", "input/notes.txt"]
    assert await s.download("input/data.csv") == b"a,b\n1,2\n"
    assert await s.files("output") == []
    assert [f.path for f in await s.files()] == ["input/data.csv", "input/notes.txt"]
    landed = await s.upload_files({"x.txt": b"x", "notes2.txt": local_file})
    assert [(f.path, f.size_bytes) for f in landed] == [("input/x.txt", 1), ("input/notes2.txt", 5)]
    with pytest.raises(NotFoundError):
        await s.download("output/missing.txt")

    artifact_id = await sdk.seed_artifact(s.id, "output/report.md", b"# hi\n")
    assert [a.artifact_id for a in await s.artifacts()] == [artifact_id]
    assert (await s.artifact(artifact_id)).path == "output/report.md"
    assert await s.artifact_content(artifact_id) == b"# hi\n"
    assert await s.download("output/report.md") == b"# hi\n"
    with pytest.raises(NotFoundError):
        await s.artifact("artifact_0000000000000000")

    assert (await s.task_lists()).lists == []
    with pytest.raises(NotFoundError):
        await s.task_list("nothing-here")

    first = await c.memory.read()
    content = "---\nscope: user\n---\n- Dates as YYYY-MM-DD.\n"
    written = await c.memory.write(content, if_match=first.etag or "*")
    assert written.etag and "YYYY-MM-DD" in (await c.memory.read()).content
    with pytest.raises(PreconditionFailedError):
        await c.memory.write(content + "- More.\n", if_match=first.etag or '"0"')
    again = await c.memory.write(content + "- More.\n", if_match=written.etag)
    assert again.etag != written.etag
    skill = await c.memory.read("report")
    assert skill.scope == "skill:report"
    skill_text = "---\nscope: skill:report\n---\n- Tables first.\n"
    await c.memory.write(skill_text, if_match=skill.etag or "*", skill="report")
    assert "Tables first" in (await c.memory.read("report")).content

    listed = [f.scope for f in (await c.memory.list()).files]
    assert listed[0] == "user" and "skill:report" in listed
    history = await c.memory.history()
    assert history.versions[0].current and history.versions[0].version == again.etag
    restored = await c.memory.restore(written.etag, if_match=again.etag)
    assert "- More." not in restored.content and "YYYY-MM-DD" in restored.content
    with pytest.raises(PreconditionFailedError):
        await c.memory.restore(written.etag, if_match=again.etag)
    assert (await c.memory.history("report")).scope == "skill:report"


async def test_permissions_and_typed_errors(sdk: SdkStack) -> None:
    c = sdk.client
    s = await c.create_session(agent_config=ASK_LOOKUP)
    async with s.send("may I?") as stream:
        async for event in stream:
            if isinstance(event, RunPermissionRequested):
                waiting = await s.permissions()
                assert [r.request_id for r in waiting] == [event.request.request_id]
                assert waiting[0].expires_at is not None
                decision = await s.allow(event.request.request_id)
                assert decision.behavior.value == "allow"
                with pytest.raises(ConflictError) as twice:
                    await s.deny(event.request.request_id, "too late")
                assert twice.value.code == "already_decided"
    assert stream.finished is not None and stream.finished.status is RunStatus.COMPLETED
    assert stream.tool_uses[0].result is not None and not stream.tool_uses[0].is_error

    with pytest.raises(NotFoundError) as missing:
        await c.session("sess_20200101_000000_0000000000000000").get()
    assert missing.value.status == 404 and missing.value.code == "not_found"
    with pytest.raises(ValidationError) as invalid:
        await s.post("x", agent_config={"max_turns": -1})
    assert invalid.value.field == "body.agent_config.max_turns"
    assert invalid.value.errors[0].path == ("body", "agent_config", "max_turns")
    with pytest.raises(ValidationError) as neither:
        await s.post()
    assert neither.value.code == "validation_error" and neither.value.field == "body"
    with pytest.raises(NotFoundError):
        await s.run("run_0000000000000000").get()


async def test_named_agents_and_sessions_made_from_them(sdk: SdkStack) -> None:
    assistants = sdk.client.assistants
    made = await assistants.create(
        {"name": "sdk-helper", "instructions": "HELP-V1", "config": {"max_turns": 3}}
    )
    assert (made.version, made.overridable) == (1, ["max_turns", "model", "temperature"])
    with pytest.raises(ConflictError) as taken:
        await assistants.create({"name": "sdk-helper"})
    assert taken.value.code == "assistant_exists"
    assert "sdk-helper" in [a.name for a in (await assistants.list()).items]

    session = await sdk.client.create_session(assistant="sdk-helper")
    pinned = (await session.get()).metadata
    assert pinned["assistant"]["version"] == 1
    assert pinned["agent_config"] == {"max_turns": 3, "system_prompt": "HELP-V1"}
    async with session.send("hello") as stream:
        finished = await stream.wait()
    assert finished.status is RunStatus.COMPLETED
    with pytest.raises(ConflictError) as refused:  # the assistant's definition refuses it
        await sdk.client.create_session(
            assistant="sdk-helper", agent_config={"enabled_tools": ["lookup"]}
        )
    assert refused.value.code == "override_not_allowed"

    v2 = await assistants.update("sdk-helper", {"instructions": "HELP-V2"}, if_version=1)
    assert (v2.version, v2.config.max_turns) == (2, 3)
    with pytest.raises(PreconditionFailedError):
        await assistants.replace("sdk-helper", {"instructions": "lost"}, if_version=1)
    assert (await assistants.get("sdk-helper", version=1)).instructions == "HELP-V1"
    assert [v.version for v in (await assistants.versions("sdk-helper")).items] == [1, 2]
    assert (await session.get()).metadata["assistant"]["version"] == 1  # still pinned

    await assistants.archive("sdk-helper")
    with pytest.raises(NotFoundError):
        await assistants.get("sdk-helper")
    assert (await assistants.get(made.assistant_id)).status == "archived"


def _gateway_of(stack_pid: int) -> psutil.Process:
    for child in psutil.Process(stack_pid).children(recursive=True):
        if "serve gateway" in " ".join(child.cmdline()):
            return child
    raise AssertionError("no gateway process under the stack")


async def test_the_iterator_resumes_across_a_gateway_restart(sdk: SdkStack) -> None:
    c = sdk.client
    s = await c.create_session(agent_config=ASK_LOOKUP)
    got = []
    async with s.send("survive a restart") as stream:
        async for event in stream:
            got.append(event)
            if isinstance(event, RunPermissionRequested):
                break
        # The run waits on the permission while its gateway dies under the open stream.
        victim = _gateway_of(c.pid)
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        deadline = time.monotonic() + 60
        while True:  # the supervisor brings a new gateway up
            try:
                await c.health()
                break
            except soong_agent.TransportError:
                assert time.monotonic() < deadline, "no gateway again within 60 s"
                await asyncio.sleep(0.2)
        await s.allow(event.request.request_id)
        got += [e async for e in stream]
    assert stream.reconnects >= 1 and _gateway_of(c.pid).pid != victim.pid
    assert stream.finished is not None and stream.finished.status is RunStatus.COMPLETED
    assert stream.run_id is not None
    whole = [e async for e in s.run(stream.run_id).events()]
    assert got == whole  # nothing lost, nothing twice
    assert any(e.type == "tool_result" for e in got) and got[-1] == stream.finished


async def test_rate_limited_answers_say_when_and_the_sdk_waits(sdk: SdkStack) -> None:
    c = sdk.client
    s = await c.create_session()
    async with soong_agent.AsyncClient(c.base_url, c.api_key, max_retries=0) as eager:
        answers = await asyncio.gather(
            *(eager.session(s.id).get() for _ in range(80)), return_exceptions=True
        )
    limited = [a for a in answers if isinstance(a, RateLimitedError)]
    assert limited, "80 requests at once stayed under a burst of 30"
    assert all(e.code == "rate_limited" and (e.retry_after_s or 0) >= 1 for e in limited)
    assert all(not isinstance(a, BaseException) or isinstance(a, RateLimitedError) for a in answers)
    patient = await asyncio.gather(*(s.get() for _ in range(30)))  # retried after Retry-After
    assert {p.session_id for p in patient} == {s.id}


def _processes_of(home: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            ours = str(home) in cmdline or proc.environ().get("SOONG_AGENT_HOME") == str(home)
            if ours and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


# The README's loop, left with a plain ``break`` (no ``async with`` around the stream), in a
# process of its own so that what it prints when its event loop closes is seen.
BREAK_OUT = """
import asyncio, sys
import soong_agent

async def main() -> None:
    url, key, sid = sys.argv[1:4]
    async with soong_agent.AsyncClient(url, key) as client:
        stream = client.session(sid).send("look it up", cancel_on_exit=True)
        async for event in stream:
            break
        print(stream.run_id, flush=True)

asyncio.run(main())
"""


async def test_a_plain_break_out_of_the_loop_cancels_the_run_and_exits_quietly(
    sdk: SdkStack,
) -> None:
    c = sdk.client
    s = await c.create_session(agent_config=ASK_LOOKUP)  # the run waits: only a cancel ends it
    script = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        BREAK_OUT,
        c.base_url,
        c.api_key,
        s.id,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await script.communicate()
    assert script.returncode == 0, err.decode()
    assert err.decode() == ""  # no RuntimeError, no task or generator left behind
    run = s.run(out.decode().strip())
    async with asyncio.timeout(30):
        finished = await run.wait()
    assert finished.status is RunStatus.CANCELLED


class _AnswerLosingProxy:
    """A loopback TCP proxy to the gateway that loses the answer to the first ``POST
    …/messages`` it carries: the request reaches the gateway, which acts on it, and the
    connection is closed before the first byte of the answer gets back to the client."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.lost: list[bytes] = []  # the Idempotency-Key of each post whose answer was lost
        self.posts: list[bytes] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        armed: list[bytes] = []

        async def to_gateway() -> None:
            while chunk := await reader.read(65536):
                if chunk.startswith(b"POST ") and b"/messages HTTP/1.1" in chunk.split(b"\r\n")[0]:
                    key = re.search(rb"(?im)^idempotency-key: *(\S+)", chunk)
                    self.posts.append(key.group(1) if key else b"")
                    if not self.lost:
                        armed.append(self.posts[-1])
                up_writer.write(chunk)
                await up_writer.drain()

        async def to_client() -> None:
            while chunk := await up_reader.read(65536):
                if armed and not self.lost:
                    self.lost.append(armed[0])  # the gateway answered: lose it
                    return
                writer.write(chunk)
                await writer.drain()

        pumps = [asyncio.ensure_future(to_gateway()), asyncio.ensure_future(to_client())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for w in (writer, up_writer):
                w.close()


async def test_a_post_whose_answer_was_lost_is_sent_again_without_a_second_run(
    sdk: SdkStack,
) -> None:
    c = sdk.client
    proxy = _AnswerLosingProxy(c.base_url)
    async with proxy as url, soong_agent.AsyncClient(url, c.api_key) as through:
        s = await c.create_session()
        accepted = await through.session(s.id).post("remember me once")
        # The first answer was lost; the SDK sent the post again with the same key.
        assert len(proxy.lost) == 1 and proxy.lost[0]
        assert proxy.posts == [proxy.lost[0], proxy.lost[0]]
        await s.run(accepted.run_id).wait()
        assert [r.run_id for r in await s.runs()] == [accepted.run_id]
        # The same for a streamed post: the repeat streams the first post's run from its start.
        proxy.lost.clear()
        proxy.posts.clear()
        streamed = await c.create_session()
        async with through.session(streamed.id).send("and me") as stream:
            events = [e async for e in stream]
        assert len(proxy.lost) == 1 and proxy.posts == [proxy.lost[0], proxy.lost[0]]
        assert stream.finished is not None and stream.finished.status is RunStatus.COMPLETED
        assert [r.run_id for r in await streamed.runs()] == [stream.run_id]
        assert events == [e async for e in streamed.run(stream.run_id).events()]


async def test_local_mode_stops_cleanly_leaving_nothing(sdk: SdkStack) -> None:
    home, pid = sdk.client.home, sdk.client.pid
    up = psutil.Process(pid)
    tree = [up, *up.children(recursive=True)]
    names = " ".join(" ".join(p.cmdline()) for p in tree)
    assert "valkey-server" in names and "serve gateway" in names and "serve run_worker" in names
    await sdk.stop()
    alive = [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == [] and _processes_of(home) == []
    assert not home.exists()  # a temporary home is removed
