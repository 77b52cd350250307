"""Every expected failure of the CLI is one line on stderr and a non-zero exit, never a traceback.

``main`` is called in-process (an exception escaping it would be the traceback); ``up`` runs as a
subprocess because it arms the die-with-parent signal on its process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agent_core.cli import main
from agent_core.service.valkey import find_free_port
from tests.conftest import REPO


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SOONG_AGENT_HOME", str(tmp_path))
    monkeypatch.delenv("SOONG_REDIS_URL", raising=False)
    monkeypatch.delenv("SOONG_CONFIG", raising=False)
    return tmp_path


def _one_error_line(err: str, code: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert lines[0].endswith(f"[{code}]"), err


def test_keys_without_any_redis(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "list"]) == 2
    _one_error_line(capsys.readouterr().err, "redis_url_missing")


def test_keys_with_a_dead_redis(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SOONG_REDIS_URL", f"redis://:s3cret@127.0.0.1:{find_free_port()}/0")
    assert main(["keys", "create", "--account", "a"]) == 2
    err = capsys.readouterr().err
    _one_error_line(err, "bus_unreachable")
    assert "s3cret" not in err


def test_keys_with_a_stale_stack_file(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "run").mkdir()
    (home / "run" / "stack.json").write_text("{not json")
    assert main(["keys", "list"]) == 2
    _one_error_line(capsys.readouterr().err, "stack_file_unreadable")


def test_config_errors_all_in_one_report(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "config.toml").write_text("[gateway]\nprot = 1\n[bsu]\nx = 1\n")
    assert main(["keys", "list"]) == 2
    err = capsys.readouterr().err
    assert (
        "2 problems" in err and "did you mean gateway.port?" in err and "did you mean bus?" in err
    )
    assert "Traceback" not in err


def test_chat_with_the_gateway_down(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{find_free_port()}"
    assert main(["chat", "--url", url, "--key", "sa_live_x"]) != 0
    out = capsys.readouterr()
    printed = (out.out + out.err).strip()
    assert printed and len(printed.splitlines()) == 1, printed
    assert "Traceback" not in printed


def _up(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # The default model's key is set unless a test says otherwise (start-up checks it first).
    key = {"OPENAI_API_KEY": "sk-test-not-a-real-key-000000"}
    full = {**os.environ, "SOONG_AGENT_HOME": str(home), **key, **env}
    if "SOONG_REDIS_URL" not in env:
        full.pop("SOONG_REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "up"],
        env=full,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_up_with_a_dead_redis_url(tmp_path: Path) -> None:
    done = _up(
        tmp_path,
        SOONG_REDIS_URL=f"redis://127.0.0.1:{find_free_port()}/0",
        SOONG_GATEWAY_PORT=str(find_free_port()),
    )
    assert done.returncode == 2
    _one_error_line(done.stderr, "bus_unreachable")
    assert not (tmp_path / "run" / "stack.json").exists()


def test_up_with_the_gateway_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _up(tmp_path, SOONG_GATEWAY_PORT=str(port))
    assert done.returncode == 2
    assert f"the gateway port 127.0.0.1:{port} is in use" in done.stderr
    _one_error_line(done.stderr, "port_in_use")
    assert not (tmp_path / "redis").exists()  # nothing was started


def test_up_with_a_named_provider_of_an_unknown_kind(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[providers.local]\nkind = "vllm"\nmodels = ["q"]\n')
    done = _up(tmp_path, SOONG_GATEWAY_PORT=str(find_free_port()))
    assert done.returncode == 2
    assert "unknown provider 'vllm'" in done.stderr
    _one_error_line(done.stderr, "unknown_provider")
    assert not (tmp_path / "redis").exists()  # nothing was started


def test_up_without_the_models_key_names_the_variable_and_the_demo(tmp_path: Path) -> None:
    """A new user's first `make run` without a key: one line naming the variable to set and
    the command that runs without one, before anything starts."""
    (tmp_path / "config.toml").write_text('[model]\nprovider = "anthropic"\nname = "claude"\n')
    done = _up(tmp_path, ANTHROPIC_API_KEY="", SOONG_GATEWAY_PORT=str(find_free_port()))
    assert done.returncode == 2
    _one_error_line(done.stderr, "model_key_missing")
    assert "ANTHROPIC_API_KEY" in done.stderr and "make demo" in done.stderr
    assert not (tmp_path / "redis").exists()  # nothing was started


def test_backup_and_restore_refuse_what_they_cannot_do(
    home: Path, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path_factory.mktemp("taken")
    (taken / "something").write_text("x")
    assert main(["backup", str(taken)]) == 2  # never into a folder that holds something
    _one_error_line(capsys.readouterr().err, "backup_target_not_empty")
    assert main(["restore", str(tmp_path_factory.mktemp("empty"))]) == 2  # no manifest
    _one_error_line(capsys.readouterr().err, "backup_unusable")
    done = tmp_path_factory.mktemp("done")
    (done / "manifest.json").write_text('{"format": 1, "namespace": "soong", "database": {}}')
    (home / "sessions.sqlite").write_text("a database is here")
    assert main(["restore", str(done)]) == 2  # never over a home that has a database
    _one_error_line(capsys.readouterr().err, "restore_target_in_use")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["bogus"], "invalid choice: 'bogus'"),
        (["keys", "create"], "--account"),
        (["assistants", "show"], "name"),
    ],
)
def test_a_usage_mistake_is_one_error_line_too(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    _one_error_line(err, "usage")
    assert said in err and "--help" in err
