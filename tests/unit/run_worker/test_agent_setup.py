"""The worker builds its default model adapter at start-up; a provider it cannot build stops it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from agent_core.config import Settings
from agent_core.config.schema import ModelSettings
from agent_core.errors import ConfigError
from agent_core.observability.instrument import InstrumentedAdapter
from agent_core.provider import ProviderRegistry
from agent_core.tasks.client import TaskClient
from agent_core.tools import ToolRegistry
from services.run_worker.agent_setup import AgentSetup


def _setup(tmp_path: Path, model: ModelSettings) -> AgentSetup:
    settings = Settings(home=tmp_path, model=model)
    # Preparing never talks to the bus: no task client is needed for it.
    return AgentSetup(settings, ProviderRegistry(), ToolRegistry([]), cast(TaskClient, None))


def test_prepare_builds_the_default_adapter_and_its_client(tmp_path: Path) -> None:
    model = ModelSettings(provider="openai", base_url="http://127.0.0.1:9/v1", api_key_env=None)
    setup = _setup(tmp_path, model)
    setup.prepare()
    measured: Any = setup.adapter(setup.config({}))  # the cached one: built by prepare
    assert isinstance(measured, InstrumentedAdapter)  # every model call is measured
    adapter: Any = measured.inner
    assert adapter._client is not None  # the SDK client exists before any run
    assert str(adapter._client.base_url).startswith("http://127.0.0.1:9/v1")


def test_an_unknown_provider_stops_the_worker_with_the_config_error(tmp_path: Path) -> None:
    setup = _setup(tmp_path, ModelSettings(provider="nonesuch"))
    with pytest.raises(ConfigError) as info:
        setup.prepare()
    assert info.value.code == "unknown_provider" and "nonesuch" in info.value.message


def test_a_provider_that_cannot_be_built_stops_the_worker_too(tmp_path: Path) -> None:
    setup = _setup(tmp_path, ModelSettings(provider="openai", base_url="http://[::1"))
    with pytest.raises(ConfigError) as info:
        setup.prepare()
    assert info.value.code == "provider_unavailable"
    assert "'openai' cannot be built" in info.value.message
