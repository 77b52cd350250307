"""Usage totals, token budgets and a run's file changes through the HTTP API, on a stack of its
own (the OpenAI fake as its model, a budget for one account).

A session's GET carries its usage totals and ``GET /v1/usage`` the account's by day and model
(only the caller's); an account whose budget is used up has its runs ended ``budget_exhausted``
with an error that says so, after the turn that used it up and then before any model call; and
``GET …/runs/{id}/files`` lists what a run's tool calls wrote in ``output/`` and ``scratchpad/``,
each with its call.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Stack, start_stack, stop_stack
from tests.e2e.gateway.conftest import _create_key, new_session, run_message
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.run_worker.harness import (
    fake_server,
    last_user_text,
    text_answer,
    tool_calls_turn,
)

pytestmark = pytest.mark.e2e

_TOOL_RESULTS = "tool"


def _model(request: Any) -> Any:
    """``write``: a file in output/, then one in scratchpad/ (one call a turn), then an answer;
    anything else: an answer (7 + 3 tokens a turn; a tool turn is 11 + 5)."""
    if "write" not in last_user_text(request):
        return text_answer("ok")
    done = sum(1 for m in request["messages"] if m["role"] == _TOOL_RESULTS)
    if done == 0:
        return tool_calls_turn(
            ("call_out", "write_file", {"path": "output/report.md", "content": "# Report\n"})
        )
    if done == 1:
        return tool_calls_turn(
            ("call_tmp", "write_file", {"path": "scratchpad/notes.txt", "content": "draft\n"})
        )
    return text_answer("written")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, str]]:
    home: Path = tmp_path_factory.mktemp("usage-home")
    (home / "config.toml").write_text('[budgets]\nperiod = "day"\n[budgets.accounts]\ntight = 15\n')
    fake: FakeOpenAIServer = fake_server(_model)
    env = {
        "SOONG_MODEL_PROVIDER": "openai",
        "SOONG_MODEL_NAME": "fake-model",
        "SOONG_MODEL_BASE_URL": fake.sdk_base_url,
        "OPENAI_API_KEY": "sk-test-not-a-real-key-000000",
    }
    running = start_stack(home, workers=1, extra_env=env)
    try:
        redis_url = json.loads((home / "run" / "stack.json").read_text())["redis_url"]
        yield running, redis_url
    finally:
        stop_stack(running.process)
        fake.stop_thread()


def _client(stack: Stack, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key or stack.api_key}"}
    return httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=30)


def test_usage_totals_of_a_session_and_of_the_account_by_day_and_model(
    stack: tuple[Stack, str],
) -> None:
    running, redis_url = stack
    today = dt.datetime.now(dt.UTC).date().isoformat()
    erin, carol = _create_key(redis_url, "erin"), _create_key(redis_url, "carol")
    with _client(running, erin) as c, _client(running, carol) as other:
        first, second = new_session(c), new_session(c)
        run_message(c, first, "hi")
        run_message(c, first, "hello")
        run_message(c, second, "hi")
        session = c.get(f"/v1/sessions/{first}").json()
        assert session["usage"] == {
            "runs": 2,
            "input_tokens": 14,
            "output_tokens": 6,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "total_tokens": 20,
        }
        report = c.get("/v1/usage", params={"since": today, "until": today})
        assert report.status_code == 200, report.text
        body = report.json()
        (row,) = body["items"]
        assert (row["day"], row["model"], row["runs"], row["total_tokens"]) == (
            today,
            "fake-model",
            3,
            30,
        )
        assert body["totals"] == {k: v for k, v in row.items() if k not in ("day", "model")}
        # The account's own usage only; a day that is not one is a clear 422.
        nothing = other.get("/v1/usage").json()
        assert nothing["items"] == [] and set(nothing["totals"].values()) == {0}
        backwards = c.get("/v1/usage", params={"since": today, "until": "2000-01-01"})
        assert backwards.status_code == 200 and backwards.json()["items"] == []
        assert c.get("/v1/usage", params={"since": "yesterday"}).status_code == 422
        not_a_day = c.get("/v1/usage", params={"until": "2026-02-31"})
        assert not_a_day.status_code == 422 and not_a_day.json()["error"]["code"] == "invalid_date"
        assert other.get(f"/v1/sessions/{first}").status_code == 404


def test_a_used_up_budget_ends_runs_budget_exhausted_with_a_clear_error(
    stack: tuple[Stack, str],
) -> None:
    running, redis_url = stack
    with _client(running, _create_key(redis_url, "tight")) as c:
        sid = new_session(c)
        _, events = run_message(c, sid, "hi")  # 10 of 15 tokens
        assert events[-1].data is not None and events[-1].data["status"] == "completed"
        # The turn that uses the rest up ends the run.
        run_id, events = run_message(c, sid, "hi again")
        finished = events[-1].data
        assert finished is not None
        assert (finished["status"], finished["end_reason"]) == ("failed", "budget_exhausted")
        assert finished["error"]["code"] == "budget_exhausted"
        assert "20 of 15 tokens" in finished["error"]["message"]
        assert finished["error"]["details"] == {
            "budget_tokens": 15,
            "used_tokens": 20,
            "period": "day",
        }
        # Nothing left: the next run ends before any model call.
        run_id, events = run_message(c, sid, "and again")
        finished = events[-1].data
        assert finished is not None and finished["end_reason"] == "budget_exhausted"
        run = c.get(f"/v1/sessions/{sid}/runs/{run_id}").json()
        assert run["turn"] == 0 and run["error"]["code"] == "budget_exhausted"
    with _client(running) as c:  # another account's runs go on
        _, events = run_message(c, new_session(c), "hi")
        assert events[-1].data is not None and events[-1].data["status"] == "completed"


def test_a_runs_file_changes_are_listed_with_the_call_that_made_them(
    stack: tuple[Stack, str],
) -> None:
    running, redis_url = stack
    with _client(running) as c, _client(running, _create_key(redis_url, "dave")) as other:
        sid = new_session(c)
        run_id, _ = run_message(c, sid, "write the report")
        listed = c.get(f"/v1/sessions/{sid}/runs/{run_id}/files")
        assert listed.status_code == 200, listed.text
        items = listed.json()["items"]
        assert [(f["path"], f["area"], f["change"], f["tool_call_id"]) for f in items] == [
            ("output/report.md", "output", "created", "call_out"),
            ("scratchpad/notes.txt", "scratchpad", "created", "call_tmp"),
        ]
        assert items[0]["artifact_id"].startswith("artifact_") and items[1]["artifact_id"] is None
        assert {f["tool"] for f in items} == {"write_file"}
        assert all(f["size_bytes"] and f["node_id"] and f["at"] for f in items)
        assert other.get(f"/v1/sessions/{sid}/runs/{run_id}/files").status_code == 404
