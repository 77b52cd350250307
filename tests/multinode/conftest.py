"""A cluster of hosts for the multi-host tests (``make test-multinode``; root only).

One per module: a *core* host (storage-writer, task-WAL, memory extraction, a gateway) and two
worker hosts, ``w1`` (a run-worker) and ``w2`` (a run-worker and a second gateway), all on one
Valkey; the model is a scripted OpenAI-style server on the fabric.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.script import Delay, Finish, ScriptedTurn, Text, Usage
from tests.multinode.cluster import Cluster, cluster
from tests.multinode.harness import Service

pytestmark = pytest.mark.multinode

CORE = (
    Service("storage_writer"),
    Service("task_wal"),
    Service("memory_extraction"),
    Service("gateway", "core"),
)
# The core, ``w1`` (a run-worker) and ``w2`` (a run-worker and a second gateway).
HOSTS = (
    ("core", CORE),
    ("w1", (Service("run_worker", "w1"),)),
    ("w2", (Service("run_worker", "w2"), Service("gateway", "w2"))),
)


def answer(request: Any) -> ScriptedTurn:
    """``slow …``: forty pieces over about four seconds (long enough to kill a host mid-run);
    anything else: one short answer that quotes the message."""
    text = str(request["messages"][-1].get("content", ""))
    if text.startswith("slow"):
        steps: list[Any] = []
        for i in range(40):
            steps += [Delay(seconds=0.1), Text(text=f"piece{i} ")]
    else:
        steps = [Text(text=f"answer to {text}")]
    return ScriptedTurn(steps=[*steps, Usage(input_tokens=5, output_tokens=5), Finish()])


@pytest.fixture(scope="module")
def mn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, FakeOpenAIServer]]:
    if os.geteuid() != 0:  # namespaces, mounts, links and iptables: CI runs as root
        pytest.fail("the multi-host tests need root (make test-multinode)")
    base = tmp_path_factory.mktemp("mn")
    with cluster(base) as running, running.serving(FakeOpenAIServer(default=answer)) as model:
        running.start_hosts(HOSTS)
        yield running, model
