"""``${SOONG_AGENT_HOME}/config.toml``: schema, loader and environment overrides."""

from agent_core.config.loader import ENV_VARS, default_home, load_settings
from agent_core.config.schema import (
    BusSettings,
    GatewaySettings,
    MemorySettings,
    ModelSettings,
    RunWorkerSettings,
    Settings,
    StorageSettings,
    TaskSettings,
)

__all__ = [
    "ENV_VARS",
    "BusSettings",
    "GatewaySettings",
    "MemorySettings",
    "ModelSettings",
    "RunWorkerSettings",
    "Settings",
    "StorageSettings",
    "TaskSettings",
    "default_home",
    "load_settings",
]
