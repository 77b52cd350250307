"""``soong-agent memory replay``: same pipeline, offline, starting from the files in --home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_core.cli import main
from agent_core.memory.evaluation import EpisodeLabels
from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.memory_extraction.oracle import Oracle

DATA = REPO / "tests" / "data" / "memory"
EPISODE = DATA / "episodes" / "01_zh_finance_report.jsonl"


def test_replay_without_llm_starts_from_existing_files_and_exits(tmp_path: Path) -> None:
    memory = tmp_path / "accounts" / "acme" / "memory"
    memory.mkdir(parents=True)
    (memory / "user.md").write_text("---\nscope: user\n---\n- 我负责华东区的销售分析\n")
    proc = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "memory", "replay", str(EPISODE),
         "--home", str(tmp_path), "--account", "acme", "--no-llm",
         "--labels", str(DATA / "labels.json")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env={**os.environ, "OPENAI_API_KEY": ""},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["interactions"] == 10 and summary["llm"] is False
    assert summary["batches"]["llm"] == 0 and summary["batches"]["fallback"] > 0
    assert summary["score"]["secrets_leaked"] == 0
    text = (memory / "user.md").read_text()
    assert "华东区" in text  # the starting memory is kept
    assert "YYYY-MM-DD" in text and "YYYY/MM/DD" not in text
    assert (memory / "changes.jsonl").exists()


def test_replay_with_the_configured_memory_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    oracle = Oracle()
    oracle.labels = EpisodeLabels.model_validate(
        json.loads((DATA / "labels.json").read_text())[EPISODE.stem]
    )
    server = FakeOpenAIServer(default=oracle).start_in_thread()
    try:
        (tmp_path / "config.toml").write_text(
            f"[memory.model]\nprovider = 'openai'\nname = 'fake-model'\n"
            f"base_url = '{server.sdk_base_url}'\napi_key_env = 'SOONG_TEST_MEMORY_KEY'\n"
        )
        monkeypatch.setenv("SOONG_TEST_MEMORY_KEY", "sk-test-0123456789abcdef")
        code = main(["memory", "replay", str(EPISODE), "--home", str(tmp_path),
                     "--account", "acme", "--batch", "3"])  # fmt: skip
    finally:
        server.stop_thread()
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["llm"] is True and summary["batches"]["fallback"] == 0
    assert summary["batches"]["llm"] == len(server.requests) == oracle.answers > 0
    assert (tmp_path / "accounts" / "acme" / "memory" / "user.md").exists()


def test_an_invalid_line_is_reported_with_its_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"turns": []}\n{"turns": "nope"}\n')
    code = main(
        ["memory", "replay", str(bad), "--home", str(tmp_path), "--account", "a", "--no-llm"]
    )
    assert code == 2
    assert "bad.jsonl:2" in capsys.readouterr().err
