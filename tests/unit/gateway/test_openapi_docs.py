"""The gateway's OpenAPI document, built offline: the SDK has every operation in it, and every
event type of a run's stream is described with its schema and an example."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import soong_agent
from agent_core.config import load_settings
from agent_core.service import ServiceContext
from services.gateway.app import create_app
from services.gateway.openapi_events import EXAMPLES, STREAM_SCHEMA, event_classes
from soong_agent import _operations
from soong_agent._sse import SseDecoder, decode_event

_METHODS = {"get", "put", "post", "patch", "delete", "head", "options"}


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    settings = load_settings(
        env={
            "SOONG_AGENT_HOME": str(tmp_path_factory.mktemp("home")),
            "SOONG_REDIS_URL": "redis://127.0.0.1:1",  # never connected: no request is served
        }
    )
    yield create_app(ServiceContext(settings, "gateway", "0")).openapi()


def test_the_sdk_has_every_operation_of_the_api(document: dict[str, Any]) -> None:
    api = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
        if method in _METHODS
    }
    sdk = set(_operations.OPERATIONS)
    assert not api - sdk, f"operations the SDK lacks: {sorted(api - sdk)}"
    assert not sdk - api, (
        f"operations the SDK calls that the API does not have: {sorted(sdk - api)}"
    )
    # Each declared operation is sent by some SDK method, not only declared.
    names = [n for n, v in vars(_operations).items() if isinstance(v, _operations.Operation)]
    package = Path(soong_agent.__file__).parent
    source = "".join(p.read_text() for p in package.glob("*.py") if p.name != "_operations.py")
    unused = [n for n in names if not re.search(rf"\bops\.{n}\b", source)]
    assert not unused, f"operations no SDK method sends: {unused}"


def test_every_stream_event_is_described_with_a_schema_and_an_example(
    document: dict[str, Any],
) -> None:
    schemas = document["components"]["schemas"]
    classes = event_classes()
    assert {type(e) for e in EXAMPLES} == set(classes), "an event type without an example"
    refs = {r["$ref"].rsplit("/", 1)[-1] for r in schemas[STREAM_SCHEMA]["oneOf"]}
    assert refs == {cls.__name__ for cls in classes}
    for cls in classes:
        example = schemas[cls.__name__]["examples"][0]
        assert cls.model_validate(example).model_dump(mode="json") == example
    streams = [
        response["content"]["text/event-stream"]
        for operations in document["paths"].values()
        for operation in operations.values()
        for response in operation.get("responses", {}).values()
        if "text/event-stream" in response.get("content", {})
    ]
    # POST …/messages and …/nodes/{node_id}/regenerate (stream=true), GET …/runs/{run_id}/events
    assert len(streams) == 3
    for stream in streams:
        # one event per item: its data the JSON of a RunStreamEvent (OpenAPI 3.2's itemSchema)
        data = stream["itemSchema"]["properties"]["data"]
        assert data["contentSchema"] == {"$ref": f"#/components/schemas/{STREAM_SCHEMA}"}
        assert stream["schema"] == {"type": "array", "items": stream["itemSchema"]}
        assert len(stream["examples"]) == len(classes)
        for name, example in stream["examples"].items():
            (frame,) = SseDecoder().feed(example["value"].encode())
            assert frame.event == name and frame.id
            assert type(decode_event(frame)) in classes and example["summary"]


@pytest.mark.parametrize("console", [True, False])
def test_the_console_is_served_only_when_configured(tmp_path: Path, console: bool) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[gateway]\nconsole = {str(console).lower()}\n")
    settings = load_settings(
        env={"SOONG_AGENT_HOME": str(tmp_path), "SOONG_REDIS_URL": "redis://127.0.0.1:1"},
        config_file=config,
    )
    app = create_app(ServiceContext(settings, "gateway", "0"))
    paths = {getattr(route, "path", None) for route in app.routes}
    assert ("/console" in paths) is console
    assert "/v1/sessions/{session_id}" in app.openapi()["paths"]  # the API is the same either way
