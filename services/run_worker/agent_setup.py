"""What a run is configured with: agent config, provider adapter, tool definitions, permissions."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from agent_core.config import Settings
from agent_core.errors import ConfigError
from agent_core.observability.instrument import InstrumentedAdapter
from agent_core.provider import ProviderRegistry, ProviderSettings
from agent_core.provider.base import ProviderAdapter
from agent_core.tasks.client import TaskClient
from agent_core.tasks.tools import task_tools
from agent_core.tools import PermissionRules, Tool, ToolRegistry, Workspace
from agent_core.tools.projects import InvalidProjectError, project_dir
from agent_core.types.enums import PermissionPolicy
from agent_core.types.protocol import ToolDefinition
from agent_core.types.runtime import AgentConfig
from services.run_worker.adapters import WorkerToolRunner
from services.run_worker.child_tools import child_tools

__all__ = ["AgentSetup"]

log = logging.getLogger("soong.run_worker")


class AgentSetup:
    """Per-process caches of adapters and tool schemas, and the per-run tool registry."""

    def __init__(
        self,
        settings: Settings,
        providers: ProviderRegistry,
        tools: ToolRegistry,
        task_client: TaskClient,
    ) -> None:
        self.settings = settings
        self.providers = providers
        self.tools = tools
        self.task_client = task_client
        self._adapters: dict[tuple[str, str | None, str | None], ProviderAdapter] = {}
        self._definitions: dict[
            tuple[bool, bool, tuple[str, ...] | None], list[ToolDefinition]
        ] = {}

    def config(self, overrides: dict[str, Any]) -> AgentConfig:
        """The deployment's default model settings, with the run's overrides on top."""
        m = self.settings.model
        base: dict[str, Any] = {
            "provider": m.provider,
            "model": m.name,
            "base_url": m.base_url,
            "api_key_env": m.api_key_env,
            "max_output_tokens": m.max_output_tokens,
            "tool_policy": {"default": PermissionPolicy.ALLOW.value},
        }
        try:
            return AgentConfig.model_validate({**base, **overrides})
        except ValidationError as exc:
            raise ConfigError(
                "invalid_config",
                f"the agent configuration is invalid: {_first_problem(exc)}",
                details={"errors": exc.error_count()},
            ) from exc

    def adapter(self, config: AgentConfig) -> ProviderAdapter:
        """One adapter per provider endpoint, reused across runs (its HTTP connections too)."""
        key = (config.provider, config.base_url, config.api_key_env)
        adapter = self._adapters.get(key)
        if adapter is None:
            api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
            raw = self.providers.create(
                ProviderSettings(
                    provider=config.provider,
                    base_url=config.base_url,
                    api_key=api_key,
                    timeout_s=self.settings.model.timeout_s,
                    provider_options=config.provider_options,
                )
            )
            adapter = InstrumentedAdapter(raw, config.provider)  # every model call measured
            self._adapters[key] = adapter
        return adapter

    def warm_up(self) -> None:
        """Build the default model's adapter and its client (imports the provider SDK, which
        takes a CPU-second): at start-up, not inside the first run. Never raises: a bad model
        configuration is reported by the runs that use it."""
        try:
            adapter = self.adapter(self.config({}))
            warm = getattr(adapter, "warm_up", None)  # optional: in-process models have nothing
            if callable(warm):
                warm()
        except Exception as exc:
            log.warning("could not prepare the default model adapter: %s", exc)

    def project(self, cwd: str, workspace: Workspace) -> str:
        """The folder of the session's project for its task tools; ``""`` when the stored name is
        no longer usable (task-wal then refuses, and the task tools say so to the model)."""
        try:
            roots = self.settings.projects.roots
            return str(project_dir(cwd, roots=roots, workspace_root=workspace.root))
        except InvalidProjectError as exc:
            log.warning("session project %r is not usable: %s", cwd[:200], exc.message)
            return ""

    def registry(
        self, cwd: str, children: Sequence[Tool[Any]] = (), *, orchestrator: bool = False
    ) -> ToolRegistry:
        """The run's tools: the shared built-ins plus task tools bound to the session's project,
        and ``children`` (a parent's tools that start child runs; child runs get none). An
        orchestrator works through its workers: it gets no built-ins."""
        extra: list[Tool[Any]] = task_tools(self.task_client, cwd=cwd)
        return ToolRegistry([*(() if orchestrator else self.tools), *extra, *children])

    def definitions(
        self, enabled: list[str] | None, *, children: bool, orchestrator: bool = False
    ) -> list[ToolDefinition]:
        """Tool schemas, computed once per set of enabled tools rather than once per run
        (``enabled`` restricts what an orchestrator's workers see, not the orchestrator)."""
        if orchestrator:
            enabled = None
        key = (children, orchestrator, None if enabled is None else tuple(sorted(enabled)))
        cached = self._definitions.get(key)
        if cached is None:
            # Definitions do not depend on the project directory or on who runs: any describe them.
            tools = child_tools(None) if children else ()
            registry = self.registry("/", tools, orchestrator=orchestrator)
            cached = WorkerToolRunner.definitions_for(registry, enabled)
            self._definitions[key] = cached
        return cached

    @staticmethod
    def rules(config: AgentConfig) -> PermissionRules:
        """The agent's tool policy as permission rules (deny over ask over allow)."""
        policy = config.tool_policy
        per_tool: dict[str, PermissionPolicy] = {}
        for name in policy.allow:
            per_tool[name] = PermissionPolicy.ALLOW
        for name in policy.ask:
            per_tool[name] = PermissionPolicy.ASK
        for name in policy.deny:
            per_tool[name] = PermissionPolicy.DENY
        return PermissionRules(default=policy.default, per_tool=per_tool)


def _first_problem(exc: ValidationError) -> str:
    """The first error of a validation, without the input that caused it."""
    error = exc.errors(include_input=False, include_url=False)[0]
    field = ".".join(str(p) for p in error["loc"]) or "config"
    return f"{field}: {error['msg']}"
