"""A session's project folder is the agent's working folder, in a real run: the file tools read it
(plain relative paths and ``project/…``), writes into it are refused with where to write instead,
the code sandbox sees it read-only at ``/workspace/project``, and ``input/``, ``scratchpad/`` and
``output/`` keep working beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_core.ids import new_id, new_session_id
from agent_core.types.enums import AgentType
from tests.integration.run_worker.harness import BusClient, Cluster, text_answer, tool_calls_turn

FACTS = "north,12\nsouth,30\n"
SCRIPT = (
    "import pathlib\n"
    "text = pathlib.Path('/workspace/project/sales/facts.csv').read_text()\n"
    "pathlib.Path('/workspace/output/copy.csv').write_text(text)\n"
    "try:\n"
    "    pathlib.Path('/workspace/project/sales/x.txt').write_text('x')\n"
    "except OSError as exc:\n"
    "    print('project write refused:', type(exc).__name__)\n"
    "print('rows', len(text.splitlines()))\n"
)
STEPS = [
    ("call_read", "read_file", {"path": "sales/facts.csv"}),
    ("call_list", "list_dir", {"path": "project"}),
    ("call_write", "write_file", {"path": "sales/facts.csv", "content": "tampered"}),
    ("call_code", "run_python", {"code": SCRIPT}),
    ("call_out", "write_file", {"path": "output/summary.md", "content": "42 rows"}),
]


def _model(request: Any) -> Any:
    done = sum(1 for m in request["messages"] if m["role"] == "tool")
    if done < len(STEPS):
        return tool_calls_turn(STEPS[done])
    return text_answer("done")


def _result(request: Any, call_id: str) -> str:
    return str(next(m for m in request["messages"] if m.get("tool_call_id") == call_id)["content"])


async def test_the_project_folder_is_the_working_folder(
    make_cluster: Any, client: BusClient, tmp_path: Path
) -> None:
    project = tmp_path / "projects" / "acme"
    (project / "sales").mkdir(parents=True)
    (project / "sales" / "facts.csv").write_text(FACTS)
    config = f'\n[projects]\nroots = {{ acme = "{project}" }}\n'
    cluster: Cluster = make_cluster(_model, workers=1, extra_config=config)
    await client.wait_ready(("storage_writer", "run_worker"))
    sid = new_session_id()
    receipt = await client.storage.create_session(
        sid,
        account_id="acct1",
        cwd="acme",
        root_agent_id=new_id("agent"),
        root_agent_type=AgentType.MAIN,
    )
    assert receipt.ok, receipt.error
    submitted = await client.send(sid, "summarise the sales")
    run = (await client.wait_terminal([submitted.run_id]))[submitted.run_id]
    assert run["status"] == "completed", cluster.log_text()[-3000:]

    last = cluster.fake.requests[-1].json
    read = _result(last, "call_read")  # a plain relative path is in the project
    assert read.startswith("project/sales/facts.csv") and "2\tsouth,30" in read
    assert _result(last, "call_list") == "project/ (1 entries)\nsales/"
    refused = _result(last, "call_write")
    assert "is in the session's project folder, which agents only read here" in refused, refused
    assert "output/" in refused
    code = _result(last, "call_code")
    assert "rows 2" in code and "project write refused" in code, code
    workspace = client.home / "accounts" / "acct1" / "sessions" / sid
    assert (workspace / "output" / "copy.csv").read_text() == FACTS
    assert (workspace / "output" / "summary.md").read_text() == "42 rows"
    assert (project / "sales" / "facts.csv").read_text() == FACTS  # untouched
    assert sorted(p.name for p in (project / "sales").iterdir()) == ["facts.csv"]
