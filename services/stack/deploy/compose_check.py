"""Static check of docker-compose.yml against the image, the CLI and the configuration.

No Docker engine runs where this is developed, so the check reads what Docker would: the compose
file, the Dockerfile its services build (:mod:`services.stack.deploy.dockerfile`), the env file
example, the proxy's configuration, the locks and the README's compose section (how to get the
first API key and how to scale, which a new user needs before anything works). Each rule below
is one way a deployment broke before it existed; a problem is one line naming the service and
what is wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from agent_core.config import CONFIG_ENV_VAR, ENV_VARS
from services.stack.deploy.dockerfile import ImageFacts, read_dockerfile

__all__ = ["ENV_EXAMPLE", "MODELS_EXAMPLE", "PROVIDER_KEY_VARS", "check_compose"]

ENV_EXAMPLE: Final = Path("deploy/soong.env.example")
MODELS_EXAMPLE: Final = Path("deploy/models.env.example")
MODELS_FILE: Final = "models.env"
# The services that call a model, and so alone read its key.
_MODEL_CALLERS: Final = frozenset({"run_worker", "memory_extraction"})
README: Final = "README.md"
ENV_FILE: Final = ".env"
RUNTIME_LOCK: Final = "requirements-runtime.lock"
DEV_LOCK: Final = "requirements.lock"
PASSWORD_VAR: Final = "SOONG_REDIS_PASSWORD"
OPS_PORT: Final = 9464
# The variables that ``model.api_key_env`` may name for the built-in providers.
PROVIDER_KEY_VARS: Final = frozenset({"OPENAI_API_KEY", "ANTHROPIC_API_KEY"})
# Read by the CLI rather than the settings loader.
_CLI_VARS: Final = frozenset({"SOONG_INSTANCE", CONFIG_ENV_VAR})
_DEV_ONLY: Final = ("pytest", "mypy", "ruff", "hypothesis")
_MUST_IGNORE: Final = (".venv", ".tools", ".git")
_SINGLE: Final = ("storage_writer", "task_wal")  # one writer each, by design


@dataclass
class _Svc:
    name: str
    spec: dict[str, Any]
    serves: str  # the soong-agent service it runs
    env: dict[str, str]  # image ENV, then compose ``environment``

    @property
    def replicas(self) -> int:
        return int((self.spec.get("deploy") or {}).get("replicas", 1))

    def mounts(self) -> list[tuple[str, str, bool]]:
        """``(source, target, read_only)`` of each volume entry."""
        out = []
        for entry in self.spec.get("volumes") or []:
            if isinstance(entry, dict):
                out.append(
                    (str(entry["source"]), str(entry["target"]), bool(entry.get("read_only")))
                )
                continue
            parts = str(entry).split(":")
            out.append((parts[0], parts[1], len(parts) > 2 and "ro" in parts[2].split(",")))
        return out


def _known_env() -> set[str]:
    return set(ENV_VARS) | _CLI_VARS | PROVIDER_KEY_VARS


def _env_map(env: Any) -> dict[str, str]:
    if isinstance(env, dict):
        return {str(k): str(v) for k, v in env.items()}
    if isinstance(env, list):
        return dict(str(item).partition("=")[::2] for item in env)
    return {}


def _argv(command: Any) -> list[str]:
    if command is None:
        return []
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def check_compose(path: Path, parser: argparse.ArgumentParser) -> list[str]:
    """Problems found in the compose file (empty when it is consistent with this code)."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        return [f"{path}: cannot read: {exc}"]
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict):
        return [f"{path}: no services"]
    root = path.parent
    problems: list[str] = []
    image, context = _image(doc, root, problems)
    ours = _ours(doc, image, parser, problems)
    if not ours:
        return [*problems, f"{path}: no service runs soong-agent"]
    for rule in _RULES:
        problems += rule(doc, ours, image, root)
    if context is not None:
        problems += _build_context(context, image)
    return problems


def _image(doc: dict[str, Any], root: Path, problems: list[str]) -> tuple[ImageFacts, Path | None]:
    for svc in doc["services"].values():
        build = svc.get("build")
        if isinstance(build, dict):
            context = root / str(build.get("context", "."))
            dockerfile = context / str(build.get("dockerfile", "Dockerfile"))
            try:
                return read_dockerfile(dockerfile), context
            except OSError as exc:
                problems.append(f"cannot read the Dockerfile {dockerfile}: {exc}")
                return ImageFacts(), context
    problems.append("no service builds the soong-agent image")
    return ImageFacts(), None


def _ours(
    doc: dict[str, Any], image: ImageFacts, parser: argparse.ArgumentParser, problems: list[str]
) -> list[_Svc]:
    ours = []
    for name, spec in doc["services"].items():
        argv = _argv(spec.get("command"))
        if not argv or argv[0] != "soong-agent":
            continue
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                args = parser.parse_args(argv[1:])
            except SystemExit:
                problems.append(
                    f"{name}: not a soong-agent command: {argv} ({err.getvalue().strip()})"
                )
                continue
        serves = getattr(args, "name", None) if args.command == "serve" else None
        env = {**image.env, **_env_map(spec.get("environment"))}
        ours.append(_Svc(str(name), spec, str(serves or args.command), env))
    return ours


Rule = Callable[[dict[str, Any], list[_Svc], ImageFacts, Path], list[str]]


def _every_service_once(doc: dict[str, Any], ours: list[_Svc], *_: Any) -> list[str]:
    from agent_core.bus import SERVICE_NAMES

    served = {s.serves for s in ours}
    problems = [f"no compose service runs {name}" for name in SERVICE_NAMES if name not in served]
    for svc in ours:
        if svc.serves in _SINGLE:
            if svc.replicas != 1:
                problems.append(f"{svc.name}: {svc.serves} must run exactly once (replicas: 1)")
            if "--instance" not in _argv(svc.spec.get("command")):
                problems.append(f"{svc.name}: a single instance needs a stable --instance id")
    return problems


def _environment(doc: dict[str, Any], ours: list[_Svc], image: ImageFacts, root: Path) -> list[str]:
    problems = []
    known = _known_env()
    for svc in ours:
        for var in _env_map(svc.spec.get("environment")):
            if var not in known:
                problems.append(
                    f"{svc.name}: environment variable {var} is not read by soong-agent"
                )
        names = _env_files(svc.spec)
        if ENV_FILE not in names:
            problems.append(f"{svc.name}: no env_file {ENV_FILE} (SOONG_* settings)")
        calls_models = svc.serves in _MODEL_CALLERS
        if calls_models and MODELS_FILE not in names:
            problems.append(f"{svc.name}: no env_file {MODELS_FILE} (the model keys it needs)")
        if not calls_models and MODELS_FILE in names:
            problems.append(f"{svc.name}: reads {MODELS_FILE}, but calls no model: no keys here")
        leaked = sorted(PROVIDER_KEY_VARS & set(_env_map(svc.spec.get("environment"))))
        if leaked and not calls_models:
            problems.append(f"{svc.name}: gets the model key(s) {', '.join(leaked)}")
        url = svc.env.get("SOONG_REDIS_URL", "")
        if f"${{{PASSWORD_VAR}" not in url:
            problems.append(
                f"{svc.name}: SOONG_REDIS_URL carries no password (${{{PASSWORD_VAR}}})"
            )
    example = root / ENV_EXAMPLE
    try:
        text = example.read_text(encoding="utf-8")
    except OSError:
        return [*problems, f"no env file example {ENV_EXAMPLE}"]
    listed = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", text, flags=re.M))
    for var in sorted((_known_env() - PROVIDER_KEY_VARS) | {PASSWORD_VAR}):
        if var not in listed:
            problems.append(f"{ENV_EXAMPLE}: does not list {var}")
    for var in sorted(PROVIDER_KEY_VARS & listed):
        problems.append(f"{ENV_EXAMPLE}: lists {var}, which every service would read")
    models = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", _read(root / MODELS_EXAMPLE), re.M))
    for var in sorted(PROVIDER_KEY_VARS - models):
        problems.append(f"{MODELS_EXAMPLE}: does not list {var}")
    return problems


def _env_files(spec: dict[str, Any]) -> list[str]:
    files = spec.get("env_file") or []
    files = [files] if isinstance(files, str | dict) else files
    return [str(f["path"]) if isinstance(f, dict) else str(f) for f in files]


def _mounts(doc: dict[str, Any], ours: list[_Svc], image: ImageFacts, root: Path) -> list[str]:
    problems = []
    declared = set(doc.get("volumes") or {})
    home_volumes: dict[str, str] = {}
    for svc in ours:
        home = svc.env.get("SOONG_AGENT_HOME", "")
        db_dir = posixpath.dirname(svc.env.get("SOONG_DB_PATH", posixpath.join(home, "x")))
        config_dir = posixpath.dirname(svc.env.get(CONFIG_ENV_VAR, "")) or "(unset)"
        needed = db_dir if svc.serves == "storage_writer" else home
        roots = {config_dir: "config", needed: "data"}
        covered = False
        for source, target, read_only in svc.mounts():
            named = not source.startswith((".", "/", "~"))
            if named and source not in declared:
                problems.append(f"{svc.name}: volume {source} is not declared")
            target = posixpath.normpath(target)
            role = roots.get(target)
            if role is None:
                problems.append(
                    f"{svc.name}: {source} is mounted at {target}, where {svc.serves} keeps nothing"
                    f" (its data: {needed}, its config: {config_dir})"
                )
            owner = image.owner(target)
            if owner is None:
                problems.append(
                    f"{svc.name}: {target} does not exist in the image (Docker would create it owned by root)"
                )
            elif named and owner != image.user:
                problems.append(
                    f"{svc.name}: {target} is owned by {owner} in the image, not by {image.user}"
                )
            if role == "config" and not read_only:
                problems.append(f"{svc.name}: the config folder {target} must be mounted read-only")
            if role == "data":
                covered = covered or named
                if svc.serves != "storage_writer" and named:
                    home_volumes[svc.name] = source
        if not covered:
            problems.append(f"{svc.name}: {needed} is on no named volume (lost with the container)")
    if len(set(home_volumes.values())) > 1:
        problems.append(f"the services see different homes: {home_volumes}")
    used = {
        source
        for spec in doc["services"].values()
        for source, _, _ in _Svc("", spec, "", {}).mounts()
    }
    unused = sorted(declared - used)
    return problems + [f"volume {v} is declared but no service uses it" for v in unused]


def _ready_url(test: Any) -> str:
    return " ".join(_argv(test)) if not isinstance(test, list) else " ".join(map(str, test))


def _healthchecks(
    doc: dict[str, Any], ours: list[_Svc], image: ImageFacts, root: Path
) -> list[str]:
    problems = []
    for svc in ours:
        check = svc.spec.get("healthcheck") or {}
        test = _ready_url(check.get("test"))
        port = (
            svc.env.get("SOONG_GATEWAY_PORT", "8720")
            if svc.serves == "gateway"
            else svc.env.get("SOONG_OPS_PORT", "")
        )
        if not test:
            problems.append(f"{svc.name}: no healthcheck")
        elif f"127.0.0.1:{port}/readyz" not in test:
            problems.append(
                f"{svc.name}: the healthcheck does not ask the service's own /readyz on port {port or '?'} ({test[:80]})"
            )
    for name, spec in doc["services"].items():
        if name in {s.name for s in ours}:
            continue
        if not (spec.get("healthcheck") or {}).get("test"):
            problems.append(f"{name}: no healthcheck")
    return problems


def _bus(doc: dict[str, Any], ours: list[_Svc], image: ImageFacts, root: Path) -> list[str]:
    redis = doc["services"].get("redis")
    if redis is None:
        return ["no redis service"]
    problems = []
    command = " ".join(_argv(redis.get("command")))
    if "requirepass" not in command or PASSWORD_VAR not in command:
        problems.append(f"redis: no password (requirepass from {PASSWORD_VAR})")
    if PASSWORD_VAR not in _ready_url((redis.get("healthcheck") or {}).get("test")):
        problems.append("redis: the healthcheck does not authenticate")
    if str(redis.get("user") or "root").partition(":")[0] in ("root", "0"):
        problems.append("redis: runs as root (set user: the image's valkey user)")
    confs = [s for s, t, _ in _Svc("redis", redis, "", {}).mounts() if t.endswith(".conf")]
    if not confs or "appendonly yes" not in _read(root / confs[0]):
        problems.append("redis: no configuration with appendonly yes")
    for svc in ours:
        deps = svc.spec.get("depends_on") or {}
        if (
            not isinstance(deps, dict)
            or (deps.get("redis") or {}).get("condition") != "service_healthy"
        ):
            problems.append(f"{svc.name}: does not wait for redis to be healthy")
    return problems


def _front_door(doc: dict[str, Any], ours: list[_Svc], image: ImageFacts, root: Path) -> list[str]:
    problems = []
    for name, spec in doc["services"].items():
        if int((spec.get("deploy") or {}).get("replicas", 1)) > 1 and spec.get("ports"):
            problems.append(f"{name}: replicas cannot share a published host port")
    gateways = [s for s in ours if s.serves == "gateway"]
    for gw in gateways:
        if gw.spec.get("ports"):
            problems.append(f"{gw.name}: publishes its port itself, so it cannot have replicas")
        if "--instance" in _argv(gw.spec.get("command")):
            problems.append(f"{gw.name}: a fixed --instance would be shared by its replicas")
    port = gateways[0].env.get("SOONG_GATEWAY_PORT", "8720") if gateways else "8720"
    doors = [
        (n, s)
        for n, s in doc["services"].items()
        if s.get("ports") and n not in {g.name for g in gateways}
    ]
    confs = [_read(root / src) for _, s in doors for src, _, _ in _Svc("", s, "", {}).mounts()]
    upstream = [c for c in confs if f"gateway:{port}" in c]
    if gateways and not gateways[0].spec.get("ports") and not upstream:
        problems.append(f"no published port leads to the gateways (a proxy to gateway:{port})")
    for conf in upstream:
        if "proxy_buffering off" not in conf:
            problems.append(
                "the proxy buffers responses: event streams would stall (proxy_buffering off)"
            )
    return problems


def _readme(doc: dict[str, Any], ours: list[_Svc], image: ImageFacts, root: Path) -> list[str]:
    """The README beside the compose file says, in its compose section, how to get the first API
    key and how to scale the services that scale, with this file's service names."""
    text = _read(root / README)
    sections = re.split(r"^#+ ", text, flags=re.M)
    section = next((s for s in sections if "compose" in s.partition("\n")[0].lower()), "")
    if not section:
        return [f"{README}: no section on running it with docker compose"]
    problems = []
    if "Compose v2" not in section:
        problems.append(
            f"{README}: the compose section does not say it needs Docker Compose v2 "
            "(`docker compose`; 1.x refuses this file)"
        )
    if "soong-agent keys create" not in section:
        problems.append(
            f"{README}: the compose section does not say how to get the first API key "
            "(soong-agent keys create)"
        )
    for svc in ours:
        if svc.serves in ("run_worker", "gateway") and f"--scale {svc.name}=" not in section:
            problems.append(
                f"{README}: the compose section does not say how to scale {svc.name} "
                f"(--scale {svc.name}=N)"
            )
    return problems


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _pins(text: str) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)", text, flags=re.M))


def _excludes_all(dockerignore: str) -> bool:
    lines = [ln.strip() for ln in dockerignore.splitlines()]
    return next((ln for ln in lines if ln and not ln.startswith("#")), "") == "*"


def _build_context(context: Path, image: ImageFacts) -> list[str]:
    problems = []
    ignored = _read(context / ".dockerignore")
    if not ignored:
        problems.append("no .dockerignore: a build would send .venv, .tools and .git")
    elif not (_excludes_all(ignored) or all(p in ignored for p in _MUST_IGNORE)):
        problems.append(f".dockerignore must exclude {', '.join(_MUST_IGNORE)}")
    if not any(RUNTIME_LOCK in run for run in image.installs):
        problems.append(f"the image does not install from {RUNTIME_LOCK}")
    runtime, dev = _pins(_read(context / RUNTIME_LOCK)), _pins(_read(context / DEV_LOCK))
    if not runtime:
        return [*problems, f"no {RUNTIME_LOCK} (make lock)"]
    problems += [f"{RUNTIME_LOCK} holds the dev tool {p}" for p in _DEV_ONLY if p in runtime]
    problems += [
        f"{RUNTIME_LOCK} pins {p}=={v} but {DEV_LOCK} {p}=={dev.get(p)} (make lock)"
        for p, v in runtime.items()
        if dev.get(p) != v
    ]
    return problems


_RULES: Final[Iterable[Rule]] = (
    _every_service_once,
    _environment,
    _mounts,
    _healthchecks,
    _bus,
    _front_door,
    _readme,
)
