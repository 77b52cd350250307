"""The committed AsyncAPI document is the one the code generates."""

from __future__ import annotations

import json
from pathlib import Path

from agent_core.bus.asyncapi import asyncapi_document

REPO = Path(__file__).resolve().parents[3]


def test_committed_asyncapi_document_is_current() -> None:
    committed = (REPO / "docs" / "asyncapi.json").read_text()
    assert committed == asyncapi_document(), "run `make asyncapi` and commit docs/asyncapi.json"


def test_document_covers_every_stream_and_contract() -> None:
    doc = json.loads(asyncapi_document())
    assert doc["asyncapi"].startswith("3.")
    channels = set(doc["channels"])
    for stream in (
        "runs",
        "storage:commands",
        "storage:queries",
        "tasks:commands",
        "memory:interactions",
        "dlq",
    ):
        assert f"soong:{stream}" in channels
    schemas = set(doc["components"]["schemas"])
    assert {
        "AppendNode",
        "CommandReceipt",
        "RunNudge",
        "Interaction",
        "DeadLetter",
        "HealthPing",
    } <= schemas
