"""The worker prepares its default model adapter at start-up, and a bad model config never stops it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import pytest

from agent_core.config import Settings
from agent_core.config.schema import ModelSettings
from agent_core.observability.instrument import InstrumentedAdapter
from agent_core.provider import ProviderRegistry
from agent_core.tasks.client import TaskClient
from agent_core.tools import ToolRegistry
from services.run_worker.agent_setup import AgentSetup


def _setup(tmp_path: Path, model: ModelSettings) -> AgentSetup:
    settings = Settings(home=tmp_path, model=model)
    # Warm-up never talks to the bus: no task client is needed for it.
    return AgentSetup(settings, ProviderRegistry(), ToolRegistry([]), cast(TaskClient, None))


def test_warm_up_builds_the_default_adapter_and_its_client(tmp_path: Path) -> None:
    model = ModelSettings(provider="openai", base_url="http://127.0.0.1:9/v1", api_key_env=None)
    setup = _setup(tmp_path, model)
    setup.warm_up()
    measured: Any = setup.adapter(setup.config({}))  # the cached one: built by warm_up
    assert isinstance(measured, InstrumentedAdapter)  # every model call is measured
    adapter: Any = measured.inner
    assert adapter._client is not None  # the SDK client exists before any run
    assert str(adapter._client.base_url).startswith("http://127.0.0.1:9/v1")


def test_warm_up_of_an_unknown_provider_only_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    setup = _setup(tmp_path, ModelSettings(provider="nonesuch"))
    with caplog.at_level(logging.WARNING, logger="soong.run_worker"):
        setup.warm_up()
    assert "unknown provider" in caplog.text
