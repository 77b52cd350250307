"""One run on a stack with JSON logs and tracing to a local OTLP receiver: its end is logged once
with its ids and figures, every service's metrics count it once, and its spans form one trace
across the gateway, the run-worker and the storage-writer."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import Stack, run_one_message, start_stack, stop_stack
from tests.fakes.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

_SAMPLE = re.compile(r"^(\w+)(?:\{(.*)\})? (\S+)$")


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, OtlpReceiver]]:
    with OtlpReceiver() as receiver:
        env = {
            "SOONG_MODEL_PROVIDER": "fake",  # answers after one tool call
            "SOONG_LOG_FORMAT": "json",
            "SOONG_OTLP_ENDPOINT": receiver.endpoint,
        }
        stack = start_stack(tmp_path_factory.mktemp("observed"), workers=1, extra_env=env)
        try:
            yield stack, receiver
        finally:
            stop_stack(stack.process)


@pytest.fixture(scope="module")
def one_run(observed: tuple[Stack, OtlpReceiver]) -> dict[str, str]:
    stack, _ = observed
    session, run_id, kinds = run_one_message(stack.gateway_url, stack.api_key)
    assert kinds[-1] == "event: run_finished"
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    run = httpx.get(
        f"{stack.gateway_url}/v1/sessions/{session}/runs/{run_id}", headers=headers, timeout=30
    ).json()
    return {"session_id": session, "run_id": run_id, "agent_id": run["agent_id"]}


def _samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) == name:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
            out.append((labels, float(match.group(3))))
    return out


def _scrapes(stack: Stack) -> dict[str, str]:
    ops = json.loads((stack.home / "run" / "stack.json").read_text())["ops"]
    return {name: httpx.get(f"{url}/metrics", timeout=10).text for name, url in ops.items()}


def test_every_service_counts_the_run_once(
    observed: tuple[Stack, OtlpReceiver], one_run: dict[str, str]
) -> None:
    stack, _ = observed
    scrapes = _scrapes(stack)
    assert set(scrapes) == {
        "gateway",
        "storage_writer",
        "task_wal",
        "memory_extraction",
        "run_worker.0",
    }
    ended = [
        (name, labels, value)
        for name, text in scrapes.items()
        for labels, value in _samples(text, "soong_runs_ended_total")
        if value
    ]
    assert ended == [("run_worker.0", {"end_reason": "completed", "status": "completed"}, 1.0)], (
        ended
    )
    worker = scrapes["run_worker.0"]
    calls = {lb["outcome"]: v for lb, v in _samples(worker, "soong_model_calls_total")}
    assert calls == {"ok": 2.0}  # the tool call's turn and the answer's
    assert [v for lb, v in _samples(worker, "soong_tool_calls_total")] == [1.0]
    tokens = {lb["direction"]: v for lb, v in _samples(worker, "soong_model_tokens_total")}
    assert tokens["in"] > 0 and tokens["out"] > 0
    assert _samples(worker, "soong_model_time_to_first_token_seconds_count")[0][1] == 2.0
    [(model_labels, timed)] = _samples(worker, "soong_model_call_seconds_count")
    assert timed == 2.0 and set(model_labels) == {"provider", "model"}
    assert _samples(worker, "soong_tool_call_seconds_count") == [({"tool": "lookup"}, 1.0)]
    assert _samples(worker, "soong_run_duration_seconds_count") == [({"status": "completed"}, 1.0)]
    assert _samples(scrapes["gateway"], "soong_runs_submitted_total") == [({}, 1.0)]
    assert _samples(scrapes["gateway"], "soong_sse_streams_open") == [({}, 0.0)]
    batches = _samples(scrapes["storage_writer"], "soong_writer_batch_commands_count")
    assert batches and batches[0][1] > 0
    commits = _samples(scrapes["storage_writer"], "soong_writer_commit_seconds_count")
    assert commits == [({}, batches[0][1])]  # each committed batch timed once
    assert _samples(scrapes["storage_writer"], "soong_bus_pending")  # by stream, read at scrape


def test_the_json_line_of_the_finished_run_carries_its_ids_and_figures(
    observed: tuple[Stack, OtlpReceiver], one_run: dict[str, str]
) -> None:
    stack, _ = observed
    # Every line `up` prints is one JSON object, its own announcements included: jq reads them.
    records = [json.loads(line) for line in stack.log().splitlines()]
    assert any(r["service"] == "up" and "ready at" in r["message"] for r in records)
    # The two writers: the one holding the database says so, the other says it waits; neither
    # is labelled with a role the lock may give the other one.
    writers = [r["message"] for r in records if r["service"] == "storage_writer"]
    assert sum(m.startswith("active: ") for m in writers) == 1, writers
    assert sum(m.startswith("standby: the database is owned") for m in writers) == 1, writers
    ended = [r for r in records if r.get("event") == "run_ended"]
    assert len(ended) == 1, ended
    line = ended[0]
    assert {k: line[k] for k in one_run} == one_run
    assert line["service"] == "run_worker" and line["instance"] == "0"
    assert (line["status"], line["end_reason"], line["turns"]) == ("completed", "completed", 2)
    assert line["duration_ms"] > 0 and line["input_tokens"] > 0 and line["output_tokens"] > 0
    started = [r for r in records if r.get("event") == "run_started"]
    assert [r["run_id"] for r in started] == [one_run["run_id"]]
    assert not [r for r in records if r.get("logger", "").startswith("httpx")]  # DEBUG only


def test_one_trace_across_services(
    observed: tuple[Stack, OtlpReceiver], one_run: dict[str, str]
) -> None:
    _, receiver = observed

    request_name = "POST /v1/sessions/{session_id}/messages"
    wanted = {request_name, "run.queue_wait", "run", "run.claim", "tool.call", "storage.commit"}

    def complete(spans: list[ReceivedSpan]) -> bool:
        # Each service exports on its own schedule: wait until every span the checks below
        # read has arrived in the run's own trace (the gateway's request span may come after
        # the worker's, the writer's commits after both; another trace — the session's
        # creation — has commits of its own that must not stand in for the run's).
        # The writer exports its commit spans in batches of its own: the claim's may come in a
        # later batch than the run's other commits.
        runs = [s for s in spans if s.name == "run" and s.attributes["run.id"] == one_run["run_id"]]
        traces = {s.trace_id for s in runs}
        mine = [s for s in spans if s.trace_id in traces]
        names = [s.name for s in mine]
        claimed = any(
            s.name == "storage.commit" and s.attributes.get("storage.command") == "claim_run"
            for s in mine
        )
        return wanted <= set(names) and names.count("model.call") >= 2 and claimed

    spans = receiver.wait_for(complete)
    run = [s for s in spans if s.name == "run" and s.attributes["run.id"] == one_run["run_id"]]
    assert len(run) == 1
    trace = [s for s in spans if s.trace_id == run[0].trace_id]
    by_name: dict[str, list[ReceivedSpan]] = {}
    for span in trace:
        by_name.setdefault(span.name, []).append(span)
    request = [s for s in by_name[request_name] if not s.parent_span_id]
    assert len(request) == 1 and request[0].service == "soong-gateway"  # the trace's root
    spans_by_id = {s.span_id: s for s in trace}

    def descends_from_request(span: ReceivedSpan) -> bool:
        while span.parent_span_id:
            span = spans_by_id[span.parent_span_id]
        return span is request[0]

    for name in ("run.queue_wait", "run"):
        assert len(by_name[name]) == 1 and descends_from_request(by_name[name][0]), name
    (claim,) = by_name["run.claim"]
    assert claim.parent_span_id == run[0].span_id
    assert len(by_name["model.call"]) == 2 and len(by_name["tool.call"]) == 1
    assert [s.attributes["tool.name"] for s in by_name["tool.call"]] == ["lookup"]
    commits = by_name["storage.commit"]
    assert {s.service for s in commits} == {"soong-storage_writer"}
    assert any(s.attributes["storage.command"] == "claim_run" for s in commits)
    services = {s.service for s in trace}
    assert services == {"soong-gateway", "soong-run_worker", "soong-storage_writer"}, services
