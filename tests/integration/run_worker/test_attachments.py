"""Attachments reach the model as content in real runs: an image in ``input/`` as an image part, an
artifact handed back (``artifact_ref``) as its text, and — for a model configured to take no
images — the image as a note only."""

from __future__ import annotations

import base64
from typing import Any

from agent_core.bus.contracts.storage import CreateArtifact
from agent_core.ids import new_id
from agent_core.runqueue import submit_message
from agent_core.storage_client import raise_for_receipt
from agent_core.types.protocol import ArtifactRefBlock, AttachmentBlock, ContentBlock, TextBlock
from agent_core.types.runtime import ArtifactRef
from tests.integration.run_worker.harness import BusClient, Cluster, text_answer

PNG = b"\x89PNG\r\n\x1a\n-a-chart-" + bytes(range(256))


async def _send(client: BusClient, sid: str, content: list[ContentBlock]) -> dict[str, Any]:
    submitted = await submit_message(
        client.storage, client.queue, account_id="acct1", session_id=sid, content=content
    )
    return (await client.wait_terminal([submitted.run_id]))[submitted.run_id]


def _workspace(client: BusClient, sid: str) -> Any:
    return client.home / "accounts" / "acct1" / "sessions" / sid


async def test_an_image_and_an_artifact_reach_the_model_as_content(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(lambda _: text_answer("seen"), workers=1)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    (_workspace(client, sid) / "input").mkdir(parents=True, exist_ok=True)
    (_workspace(client, sid) / "input" / "chart.png").write_bytes(PNG)
    (_workspace(client, sid) / "output").mkdir(parents=True, exist_ok=True)
    (_workspace(client, sid) / "output" / "notes.md").write_text("# Notes\nQ3 grew 12%.\n")
    artifact_id = new_id("artifact")
    artifact = ArtifactRef(
        artifact_id=artifact_id,
        session_id=sid,
        path="output/notes.md",
        filename="notes.md",
        mime_type="text/markdown",
    )
    raise_for_receipt(
        await client.storage.send(
            CreateArtifact(command_id=new_id("cmd"), session_id=sid, artifact=artifact)
        )
    )

    run = await _send(
        client,
        sid,
        [
            TextBlock(text="What does the chart show?"),
            AttachmentBlock(path="input/chart.png", filename="chart.png", mime_type="image/png"),
            ArtifactRefBlock(artifact_id=artifact_id, filename="notes.md"),
        ],
    )
    assert run["status"] == "completed", cluster.log_text()[-3000:]
    [message] = cluster.fake.requests[0].json["messages"]
    parts = message["content"]
    assert {"type": "image_url", "image_url": {"url": _data_url(PNG)}} in parts
    texts = "\n".join(p["text"] for p in parts if p["type"] == "text")
    assert "[attachment: chart.png at input/chart.png]" in texts
    assert f"[artifact {artifact_id}: notes.md]\n# Notes\nQ3 grew 12%." in texts


async def test_a_model_that_takes_no_images_gets_a_note(
    make_cluster: Any, client: BusClient
) -> None:
    cluster: Cluster = make_cluster(
        lambda _: text_answer("noted"), workers=1, extra_config="\n[model]\naccepts = []\n"
    )
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = await client.new_session()
    (_workspace(client, sid) / "input").mkdir(parents=True, exist_ok=True)
    (_workspace(client, sid) / "input" / "chart.png").write_bytes(PNG)
    run = await _send(client, sid, [AttachmentBlock(path="input/chart.png", mime_type="image/png")])
    assert run["status"] == "completed", cluster.log_text()[-3000:]
    [message] = cluster.fake.requests[0].json["messages"]
    assert message["content"] == "[attachment: input/chart.png at input/chart.png]"


def _data_url(data: bytes) -> str:
    return f"data:image/png;base64,{base64.b64encode(data).decode()}"
