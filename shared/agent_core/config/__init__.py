"""``${SOONG_AGENT_HOME}/config.toml``: schema, loader and environment overrides."""

from agent_core.config.agent import agent_config
from agent_core.config.loader import (
    CONFIG_ENV_VAR,
    ENV_VARS,
    config_path,
    default_home,
    load_settings,
)
from agent_core.config.schema import (
    BusSettings,
    GatewaySettings,
    MemorySettings,
    ModelSettings,
    NamedProviderSettings,
    ObservabilitySettings,
    PluginSettings,
    ProjectSettings,
    RunWorkerSettings,
    SandboxSettings,
    Settings,
    SkillSettings,
    StorageSettings,
    TaskSettings,
)

__all__ = [
    "CONFIG_ENV_VAR",
    "ENV_VARS",
    "BusSettings",
    "GatewaySettings",
    "MemorySettings",
    "ModelSettings",
    "NamedProviderSettings",
    "ObservabilitySettings",
    "ProjectSettings",
    "RunWorkerSettings",
    "SandboxSettings",
    "Settings",
    "PluginSettings",
    "SkillSettings",
    "StorageSettings",
    "TaskSettings",
    "agent_config",
    "config_path",
    "default_home",
    "load_settings",
]
