"""The compose check: today's deployment passes, the one before it fails for each of its faults.

No Docker engine runs here, so the check reads the compose file, the Dockerfile, the env file
example, the proxy configuration and the locks; these tests hold it to catching each fault.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_core.cli import build_parser, main
from agent_core.config import ENV_VARS
from services.stack.deploy import check_compose, read_dockerfile

REPO = Path(__file__).resolve().parents[3]
BEFORE = REPO / "tests" / "data" / "compose_before"  # the deployment as it was before issue 22


def test_the_compose_file_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_compose(REPO / "docker-compose.yml", build_parser()) == []
    assert main(["compose-check", str(REPO / "docker-compose.yml")]) == 0
    assert "ok" in capsys.readouterr().out


def test_the_compose_file_before_fails_on_each_known_fault(
    capsys: pytest.CaptureFixture[str],
) -> None:
    found = check_compose(BEFORE / "docker-compose.yml", build_parser())
    problems = "\n".join(found)
    # The command prints every problem, each in the CLI's one error form, and exits 1.
    assert main(["compose-check", str(BEFORE / "docker-compose.yml")]) == 1
    printed = capsys.readouterr().err.splitlines()
    assert printed == [f"error: {problem} [compose_check]" for problem in found]
    for fault in (
        "memory is mounted at /data/home/memory, where memory_extraction keeps nothing",
        "/data/home/accounts does not exist in the image",
        "run_worker: no healthcheck",
        "task_wal: no healthcheck",
        "storage_writer: the healthcheck does not ask the service's own /readyz",
        "redis: no password",
        "gateway: publishes its port itself, so it cannot have replicas",
        "gateway: no env_file .env",
        "no .dockerignore",
        "the image does not install from requirements-runtime.lock",
        "README.md: no section on running it with docker compose",
    ):
        assert fault in problems, fault


def _copy_repo(tmp_path: Path) -> Path:
    for name in ("docker-compose.yml", ".dockerignore", "requirements.lock", "README.md"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copy(REPO / "requirements-runtime.lock", tmp_path / "requirements-runtime.lock")
    shutil.copytree(REPO / "deploy", tmp_path / "deploy")
    return tmp_path


def _edit(root: Path, change: Callable[[dict[str, Any]], None]) -> list[str]:
    path = root / "docker-compose.yml"
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc))
    return check_compose(path, build_parser())


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["volumes"].update({"spare": None}),
            "volume spare is declared but no service uses it",
        ),
        (
            lambda d: d["services"]["task_wal"]["volumes"].append("home:/data/home/accounts"),
            "/data/home/accounts does not exist in the image",
        ),
        (
            lambda d: d["services"]["run_worker"].pop("healthcheck"),
            "run_worker: no healthcheck",
        ),
        (
            lambda d: d["services"]["gateway"].update({"ports": ["8720:8720"]}),
            "gateway: replicas cannot share a published host port",
        ),
        (
            lambda d: (
                d["services"]["storage_writer"]["deploy"].update({"replicas": 2})
                if "deploy" in d["services"]["storage_writer"]
                else d["services"]["storage_writer"].update({"deploy": {"replicas": 2}})
            ),
            "storage_writer must run exactly once",
        ),
        (
            lambda d: d["services"]["redis"].update({"command": ["valkey-server"]}),
            "redis: no password",
        ),
        (
            lambda d: d["services"]["memory_extraction"].update({"env_file": []}),
            "memory_extraction: no env_file .env",
        ),
        (
            lambda d: d["services"]["gateway"]["environment"].update({"SOONG_TYPO": "1"}),
            "SOONG_TYPO is not read by soong-agent",
        ),
        (
            lambda d: d["services"]["storage_writer"].update(
                {"volumes": ["./deploy/config:/etc/soong-agent:ro"]}
            ),
            "storage_writer: /data/db is on no named volume",
        ),
        (
            lambda d: d["services"]["gateway"].update(
                {"command": ["soong-agent", "serve", "nope"]}
            ),
            "gateway: not a soong-agent command",
        ),
    ],
)
def test_each_fault_is_caught(tmp_path: Path, change: Any, expected: str) -> None:
    problems = _edit(_copy_repo(tmp_path), change)
    assert any(expected in p for p in problems), problems


def test_the_env_example_must_list_every_variable(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    example = root / "deploy" / "soong.env.example"
    example.write_text(example.read_text().replace("SOONG_MODEL_NAME=", ""))
    models = root / "deploy" / "models.env.example"
    models.write_text(models.read_text().replace("ANTHROPIC_API_KEY=", ""))
    problems = check_compose(root / "docker-compose.yml", build_parser())
    assert "deploy/soong.env.example: does not list SOONG_MODEL_NAME" in problems
    assert "deploy/models.env.example: does not list ANTHROPIC_API_KEY" in problems
    for var in ENV_VARS:  # and the real one lists all of them
        assert var in (REPO / "deploy" / "soong.env.example").read_text()


def test_model_keys_reach_only_the_services_that_call_a_model(tmp_path: Path) -> None:
    """.env is every service's environment: a key in it would reach the gateway, the writer, the
    bus's neighbours. Keys live in models.env, which only run_worker and memory_extraction read."""
    root = _copy_repo(tmp_path)
    example = root / "deploy" / "soong.env.example"
    example.write_text(example.read_text() + "OPENAI_API_KEY=\n")

    def change(d: dict[str, Any]) -> None:
        d["services"]["gateway"]["env_file"] = [".env", "models.env"]
        d["services"]["task_wal"]["environment"] = {
            **d["services"]["task_wal"].get("environment", {}),
            "ANTHROPIC_API_KEY": "x",
        }
        d["services"]["run_worker"]["env_file"] = [".env"]
        d["services"]["redis"].pop("user")

    problems = _edit(root, change)
    for expected in (
        "deploy/soong.env.example: lists OPENAI_API_KEY, which every service would read",
        "gateway: reads models.env, but calls no model: no keys here",
        "task_wal: gets the model key(s) ANTHROPIC_API_KEY",
        "run_worker: no env_file models.env (the model keys it needs)",
        "redis: runs as root (set user: the image's valkey user)",
    ):
        assert expected in problems, (expected, problems)


def test_the_readme_must_say_compose_v2(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("Compose v2", "Compose"))
    problems = check_compose(root / "docker-compose.yml", build_parser())
    assert any("does not say it needs Docker Compose v2" in p for p in problems)


def test_the_readme_must_say_how_to_get_a_key_and_scale(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    readme = root / "README.md"
    text = readme.read_text()
    readme.write_text(text.replace("keys create", "keys make").replace("--scale gateway=", ""))
    problems = check_compose(root / "docker-compose.yml", build_parser())
    assert "README.md: the compose section does not say how to get the first API key" in (
        "\n".join(problems)
    )
    assert any("how to scale gateway (--scale gateway=N)" in p for p in problems)
    assert not any("how to scale run_worker" in p for p in problems)


def test_a_mounted_folder_owned_by_root_is_caught(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    dockerfile = root / "deploy" / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text().replace("install -d -o soong -g soong -m 0750", "mkdir -p")
    )
    problems = check_compose(root / "docker-compose.yml", build_parser())
    assert any("/data/home is owned by root in the image, not by soong" in p for p in problems)


def test_the_runtime_lock_holds_no_dev_tools_and_agrees_with_the_dev_lock(tmp_path: Path) -> None:
    root = _copy_repo(tmp_path)
    lock = root / "requirements-runtime.lock"
    lock.write_text(lock.read_text() + "pytest==1.0\n")
    problems = check_compose(root / "docker-compose.yml", build_parser())
    assert "requirements-runtime.lock holds the dev tool pytest" in problems
    assert any("pins pytest==1.0 but requirements.lock" in p for p in problems)


def test_the_dockerfile_reader_follows_the_final_stage() -> None:
    facts = read_dockerfile(REPO / "deploy" / "Dockerfile")
    assert facts.user == "soong"
    assert facts.owner("/data/home") == facts.owner("/data/db") == "soong"
    assert facts.owner("/etc/soong-agent") == "soong"
    assert facts.owner("/src") is None  # the build stage's folder is not in the image
    assert {8720, 9464} <= facts.exposed
    assert facts.env["SOONG_DB_PATH"] == "/data/db/sessions.sqlite"


def test_the_valkey_password_file_is_its_owners_alone(tmp_path: Path) -> None:
    """The Valkey container's start writes the password into a 0600 file, not a command line:
    its shell command runs here with the server swapped for ``true``."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    shell, flag, script = compose["services"]["redis"]["command"]
    assert (shell, flag) == ("sh", "-c")
    auth = tmp_path / "auth.conf"
    script = script.replace("$$", "$").replace("/tmp/auth.conf", str(auth))
    script = script[: script.index("exec valkey-server")] + "true"
    password = "pw-" + os.urandom(8).hex()
    env = {"PATH": "/usr/bin:/bin", "SOONG_REDIS_PASSWORD": password}
    subprocess.run(["sh", "-c", script], env=env, check=True, timeout=10)
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
    assert auth.read_text() == f'requirepass "{password}"\n'
    assert password not in script
