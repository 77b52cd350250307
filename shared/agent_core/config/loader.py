"""Loading settings: defaults, then ``config.toml``, then environment overrides.

The environment variables read are exactly those in :data:`ENV_VARS` (a test checks that the
compose file sets no other). Provider keys are read from the variable that ``model.api_key_env``
names, by the adapter factory, never stored in settings.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from agent_core.config.schema import Settings
from agent_core.errors import ConfigError

__all__ = ["ENV_VARS", "default_home", "load_settings"]

# Variable → dotted settings key it overrides.
ENV_VARS: Final[dict[str, str]] = {
    "SOONG_AGENT_HOME": "home",
    "SOONG_REDIS_URL": "bus.redis_url",
    "SOONG_NAMESPACE": "bus.namespace",
    "SOONG_LOG_LEVEL": "log_level",
    "SOONG_GATEWAY_HOST": "gateway.host",
    "SOONG_GATEWAY_PORT": "gateway.port",
    "SOONG_DB_PATH": "storage.db_path",
    "SOONG_MODEL_PROVIDER": "model.provider",
    "SOONG_MODEL_NAME": "model.name",
    "SOONG_MODEL_BASE_URL": "model.base_url",
}


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """``$SOONG_AGENT_HOME`` or ``~/.soong-agent``."""
    env = os.environ if env is None else env
    return Path(env.get("SOONG_AGENT_HOME") or Path.home() / ".soong-agent").expanduser()


def load_settings(
    env: Mapping[str, str] | None = None, config_file: Path | None = None
) -> Settings:
    """Build settings; raise :class:`ConfigError` naming the key and the file on any bad value."""
    env = os.environ if env is None else env
    home = default_home(env)
    path = config_file or home / "config.toml"
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
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
        err = exc.errors(include_url=False)[0]
        key = ".".join(str(p) for p in err["loc"])
        where = source.get(key, str(path))
        raise ConfigError(
            "config_invalid",
            f"{where}: {key}: {err['msg']}",
            details={"key": key, "file": str(path), "source": where},
        ) from exc


def _set(data: dict[str, Any], dotted: str, value: str) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError("config_invalid", f"{part} must be a table", details={"key": part})
        node = child
    node[leaf] = value
