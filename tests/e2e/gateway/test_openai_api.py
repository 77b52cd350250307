"""The OpenAI-compatible endpoint through the official ``openai`` SDK, on the gateway tests'
stack (the scripted demo model): chat completions and responses, streamed and not, a follow-up
in the same session (by header, by ``previous_response_id``) seen in the session's tree, usage,
and errors as the SDK raises them. Another account's assistants and sessions: ``test_bola.py``.

The demo model answers "help" at once (one model call, 10 + 10 tokens) and anything else with a
``lookup`` tool call, then an answer (two calls): that tool call must stay server-side.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from services.gateway.openai_compat import parse_response_id
from tests.conftest import REPO
from tests.e2e.gateway.conftest import Gw, new_session

pytestmark = pytest.mark.e2e

HEADER = "X-Soong-Session-Id"


@pytest.fixture(scope="module")
def assistant(gw: Gw) -> str:
    """A named assistant of account A (dev)."""
    name = f"oa-{secrets.token_hex(4)}"
    with gw.client() as c:
        made = c.post("/v1/assistants", json={"name": name, "instructions": "be brief"})
        assert made.status_code == 201, made.text
    return name


@pytest.fixture(scope="module")
def client(gw: Gw) -> Iterator[openai.OpenAI]:
    """The openai SDK pointed at the gateway, with account A's key; no retries (an error is
    seen as it is)."""
    with openai.OpenAI(
        base_url=f"{gw.stack.gateway_url}/v1/openai",
        api_key=gw.stack.api_key,
        max_retries=0,
        timeout=30,
    ) as sdk:
        yield sdk


def _user_turns(gw: Gw, session_id: str) -> list[dict[str, Any]]:
    with gw.client() as c:
        tree = c.get(f"/v1/sessions/{session_id}/tree")
    assert tree.status_code == 200, tree.text
    return [n for n in tree.json()["nodes"] if n["role"] == "user"]


def test_chat_completions_then_a_streamed_follow_up_in_the_same_session(
    gw: Gw, client: openai.OpenAI, assistant: str
) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model=assistant,
        messages=[{"role": "system", "content": "be terse"}, {"role": "user", "content": "help"}],
        temperature=0.3,
        user="someone",
    )
    first = raw.parse()
    session_id = raw.headers[HEADER]
    assert first.object == "chat.completion" and first.model == assistant
    assert first.choices[0].finish_reason == "stop"
    assert (first.choices[0].message.content or "").startswith("[demo model] This is")
    assert first.usage is not None
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (10, 10)

    # The follow-up: the whole history resent, as chat clients do; only its last message is new.
    with client.chat.completions.with_streaming_response.create(
        model=assistant,
        messages=[
            {"role": "user", "content": "help"},
            {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": "find the weather"},
        ],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={HEADER: session_id},
    ) as streamed:
        assert streamed.headers[HEADER] == session_id
        chunks = list(streamed.parse())
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("[fake model]") and len(text) > 500
    # The lookup tool ran on the server: no tool call reached the client.
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 40  # two model calls of 10 + 10

    turns = _user_turns(gw, session_id)
    assert [t["preview"] for t in turns][-1] == "find the weather"
    assert len(turns) == 2 and "be terse" in turns[0]["preview"]  # the first turn's context


def test_responses_then_a_streamed_follow_up_by_previous_response_id(
    gw: Gw, client: openai.OpenAI, assistant: str
) -> None:
    first = client.responses.create(model=assistant, input="help", metadata={"ticket": "7"})
    assert first.status == "completed" and first.output_text.startswith("[demo model] This is")
    assert first.metadata == {"ticket": "7"}
    assert first.usage is not None and first.usage.total_tokens == 20
    ids = parse_response_id(first.id)
    assert ids is not None
    session_id, _ = ids

    events = list(
        client.responses.create(
            model=assistant, input="and the news", previous_response_id=first.id, stream=True
        )
    )
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = events[-1]
    assert done.type == "response.completed" and done.response.output_text == deltas
    assert done.response.previous_response_id == first.id and done.response.id != first.id
    assert parse_response_id(done.response.id) is not None
    assert parse_response_id(done.response.id)[0] == session_id
    assert done.response.usage is not None and done.response.usage.total_tokens == 40

    # The SDK's own stream helper accumulates the same events into a response.
    with client.responses.stream(
        model=assistant, input="help", previous_response_id=done.response.id
    ) as stream:
        final = stream.get_final_response()
    assert final.output_text.startswith("[demo model] This is")

    turns = _user_turns(gw, session_id)
    assert [t["preview"] for t in turns] == ["help", "and the news", "help"]


def test_errors_in_openais_shape(gw: Gw, client: openai.OpenAI, assistant: str) -> None:
    hello = [{"role": "user", "content": "help"}]
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="no-such-assistant", messages=hello)
    assert missing.value.code == "model_not_found" and missing.value.param == "model"
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="no-such-assistant", input="x", stream=True)
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(
            model=assistant, input="x", previous_response_id="resp_20260101_000000_00_0"
        )
    assert missing.value.code == "previous_response_not_found"

    bad_key = openai.OpenAI(
        base_url=f"{gw.stack.gateway_url}/v1/openai", api_key="sk-not-a-key", max_retries=0
    )
    with pytest.raises(openai.AuthenticationError) as unauthorized:
        bad_key.chat.completions.create(model=assistant, messages=hello)
    assert unauthorized.value.code == "invalid_api_key"

    with pytest.raises(openai.BadRequestError) as invalid:
        client.chat.completions.create(
            model=assistant,
            messages=[{"role": "tool", "content": "x", "tool_call_id": "call_1"}],
        )
    assert invalid.value.param == "messages[0].role"
    with pytest.raises(openai.BadRequestError) as invalid:
        client.chat.completions.create(model=assistant, messages=hello, n=2)
    assert invalid.value.param == "n"
    with pytest.raises(openai.BadRequestError) as invalid:  # a session not made from it
        with gw.client() as c:
            plain = new_session(c)
        client.chat.completions.create(
            model=assistant,
            messages=hello,
            extra_headers={HEADER: plain},
        )
    assert invalid.value.code == "model_session_mismatch"

    # A run that fails: a 500 (not streamed), an error event (streamed), a failed response.
    fail = [{"role": "user", "content": "fail"}]
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model=assistant, messages=fail)
    assert failed.value.code == "demo_failure"
    with pytest.raises(openai.APIError) as failed_stream:
        list(client.chat.completions.create(model=assistant, messages=fail, stream=True))
    assert failed_stream.value.code == "demo_failure"
    response = client.responses.create(model=assistant, input="fail")
    assert response.status == "failed" and response.error is not None

    # Whatever the body, an answer in OpenAI's shape, never a 5xx.
    url = f"{gw.stack.gateway_url}/v1/openai"
    headers = {"Authorization": f"Bearer {gw.stack.api_key}", "Content-Type": "application/json"}
    for path in ("/chat/completions", "/responses"):
        for body in (
            b"{nope",
            b"[]",
            b'{"model": 1}',
            b'{"model": "x", "messages": [], "input": []}',
            b'{"model": "%s", "messages": [{"role": "user"}], "input": "x", "extra": 1}'
            % assistant.encode(),
        ):
            answer = httpx.post(url + path, content=body, headers=headers)
            assert answer.status_code == 400, (path, body, answer.text)
            error = answer.json()["error"]
            assert set(error) == {"message", "type", "param", "code"} and error["message"]


def _run_readme_example(gw: Gw, marker: str) -> subprocess.CompletedProcess[str]:
    """The README's ```py block holding ``marker``, run as written against the stack (with the
    assistant its examples call, ``reviewer``)."""
    blocks = re.findall(r"^```py\n(.*?)^```", (REPO / "README.md").read_text(), re.S | re.M)
    (example,) = [b for b in blocks if marker in b]
    with gw.client() as c:
        made = c.post("/v1/assistants", json={"name": "reviewer"})
        assert made.status_code in (201, 409), made.text
    env = {
        **os.environ,
        "SOONG_GATEWAY_URL": gw.stack.gateway_url,
        "SOONG_API_KEY": gw.stack.api_key,
    }
    done = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done


def test_the_readme_example_runs_as_written(gw: Gw) -> None:
    done = _run_readme_example(gw, "from openai import OpenAI")
    assert done.stdout.count("[demo model]") == 1 and done.stdout.count("[fake model]") == 2


@pytest.mark.parametrize(
    ("marker", "expected"),
    [("from mcp import ClientSession", "'reviewer'"), ("from a2a.client import", "completed")],
)
def test_the_readme_mcp_and_a2a_examples_run_as_written(gw: Gw, marker: str, expected: str) -> None:
    done = _run_readme_example(gw, marker)
    assert expected in done.stdout.lower() and "[demo model]" in done.stdout
