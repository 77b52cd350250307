"""Loading settings: defaults, then ``config.toml``, then environment overrides.

The environment variables read are exactly those in :data:`ENV_VARS` plus :data:`CONFIG_ENV_VAR`
(the compose check holds the compose and env files to that list). Provider keys are read from the
variable that ``model.api_key_env`` names, by the adapter factory, never stored in settings.

Every problem of a configuration is reported at once, each naming its key and where the value came
from, with a "did you mean" for a misspelt key.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TypeGuard, get_args

from pydantic import BaseModel, ValidationError

from agent_core.config.schema import Settings
from agent_core.errors import ConfigError

__all__ = ["CONFIG_ENV_VAR", "ENV_VARS", "config_path", "default_home", "load_settings"]

# Names the configuration file; unset: ``${SOONG_AGENT_HOME}/config.toml``. A missing file means
# defaults either way (compose mounts an optional one).
CONFIG_ENV_VAR: Final = "SOONG_CONFIG"

# Variable → dotted settings key it overrides.
ENV_VARS: Final[dict[str, str]] = {
    "SOONG_AGENT_HOME": "home",
    "SOONG_REDIS_URL": "bus.redis_url",
    "SOONG_NAMESPACE": "bus.namespace",
    "SOONG_LOG_LEVEL": "log_level",
    "SOONG_DEBUG": "debug",
    "SOONG_LOG_FORMAT": "observability.log_format",
    "SOONG_OPS_HOST": "observability.ops_host",
    "SOONG_OPS_PORT": "observability.ops_port",
    "SOONG_OTLP_ENDPOINT": "observability.otlp_endpoint",
    "SOONG_GATEWAY_HOST": "gateway.host",
    "SOONG_GATEWAY_PORT": "gateway.port",
    "SOONG_DB_PATH": "storage.db_path",
    "SOONG_WRITER_STANDBY": "storage.standby",
    "SOONG_FILES_ENGINE": "files.engine",
    "SOONG_STORAGE_BACKEND": "storage.backend",
    "SOONG_STORAGE_PARTITIONS": "storage.partitions",
    "SOONG_MODEL_PROVIDER": "model.provider",
    "SOONG_MODEL_NAME": "model.name",
    "SOONG_MODEL_BASE_URL": "model.base_url",
    "SOONG_MODEL_API_KEY_ENV": "model.api_key_env",
}


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """``$SOONG_AGENT_HOME`` or ``~/.soong-agent``."""
    env = os.environ if env is None else env
    return Path(env.get("SOONG_AGENT_HOME") or Path.home() / ".soong-agent").expanduser()


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The configuration file: ``$SOONG_CONFIG`` or ``${SOONG_AGENT_HOME}/config.toml``."""
    env = os.environ if env is None else env
    named = env.get(CONFIG_ENV_VAR)
    return Path(named).expanduser() if named else default_home(env) / "config.toml"


def load_settings(
    env: Mapping[str, str] | None = None, config_file: Path | None = None
) -> Settings:
    """Build settings; raise one :class:`ConfigError` listing every bad key, value and source."""
    env = os.environ if env is None else env
    home = default_home(env)
    path = config_file or config_path(env)
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            raise ConfigError(
                "config_unreadable", f"{path}: not valid TOML: {exc}", details={"file": str(path)}
            ) from exc
    source: dict[str, str] = {}
    for var, dotted in ENV_VARS.items():
        if var in env and env[var] != "":
            _set(data, dotted, env[var])
            source[dotted] = f"environment variable {var}"
    data["home"] = str(home)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = [_problem(err, source, path) for err in exc.errors(include_url=False)]
        raise _report(problems, path) from exc


def _problem(err: Any, source: Mapping[str, str], path: Path) -> dict[str, str]:
    loc = [str(p) for p in err["loc"]]
    key = ".".join(loc)
    where = source.get(key, str(path))
    message = err["msg"]
    if err["type"] == "extra_forbidden":
        message = "unknown key"
        guess = _did_you_mean(loc)
        if guess:
            message += f" (did you mean {guess}?)"
    return {"key": key, "source": where, "message": message}


def _did_you_mean(loc: list[str]) -> str | None:
    """The closest known key at the same place as an unknown one."""
    model: type[BaseModel] = Settings
    for part in loc[:-1]:
        field = model.model_fields.get(part)
        annotation = field.annotation if field else None
        inner = [t for t in (annotation, *get_args(annotation)) if _is_model(t)]
        if not inner:
            return None
        model = inner[0]
    close = difflib.get_close_matches(loc[-1], list(model.model_fields), n=1, cutoff=0.6)
    return ".".join([*loc[:-1], close[0]]) if close else None


def _is_model(t: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(t, type) and issubclass(t, BaseModel)


def _report(problems: list[dict[str, str]], path: Path) -> ConfigError:
    lines = [f"{p['source']}: {p['key']}: {p['message']}" for p in problems]
    message = lines[0] if len(lines) == 1 else f"{len(lines)} problems:\n  " + "\n  ".join(lines)
    first = problems[0]
    return ConfigError(
        "config_invalid",
        message,
        details={
            "key": first["key"],
            "file": str(path),
            "source": first["source"],
            "problems": problems,
        },
    )


def _set(data: dict[str, Any], dotted: str, value: str) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError("config_invalid", f"{part} must be a table", details={"key": part})
        node = child
    node[leaf] = value
