"""A plug-in package installed beside the runtime: its provider and its tool serve a real turn
in a run-worker process, and its broken entry points are named in the log without taking the
worker down."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.fakes.plugin_package import (
    ANSWER,
    MARKER,
    PROVIDER_KEY,
    TOOL_NAME,
    install_plugin_package,
)
from tests.integration.run_worker.harness import BusClient, Cluster, text_answer


async def test_a_plugin_provider_and_tool_serve_a_turn(
    make_cluster: Any, client: BusClient, tmp_path: Path
) -> None:
    site = install_plugin_package(tmp_path / "site")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    cluster: Cluster = make_cluster(
        lambda _request: text_answer("the OpenAI fake is not asked"),
        workers=1,
        env={"PYTHONPATH": path, "SOONG_MODEL_PROVIDER": PROVIDER_KEY},
    )
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()

    submitted = await client.send(sid, "make it loud")
    run = (await client.wait_terminal([submitted.run_id]))[submitted.run_id]
    assert run["status"] == "completed", cluster.log_text()[-3000:]
    path_nodes = await client.path(sid, run["end_node_id"])
    assert [(n["role"], n["node_type"]) for n in path_nodes] == [
        ("user", "message"),
        ("assistant", "message"),
        ("tool", "message"),
        ("assistant", "message"),
    ]
    assert f'"name":"{TOOL_NAME}"' in path_nodes[1]["content_json"].replace(" ", "")
    assert f"{MARKER}:MAKE IT LOUD" in path_nodes[2]["content_json"]
    assert ANSWER in path_nodes[3]["content_json"]
    assert cluster.fake.requests == [], "the plug-in's model answered, not the configured fake"
    log = cluster.log_text()
    for name in ("missing", "raising", "wrong"):
        assert f"plug-in '{name}' skipped" in log
    assert "Traceback" not in log
