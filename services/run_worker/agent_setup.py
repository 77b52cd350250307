"""What a run is configured with: agent config, provider adapter, tool definitions, permissions."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from agent_core.bus.contracts.tasks import TaskScope
from agent_core.config import Settings, agent_config
from agent_core.config.providers import check_model_keys
from agent_core.errors import ConfigError, redact
from agent_core.observability.instrument import InstrumentedAdapter
from agent_core.provider import DEMO_PROVIDER, ProviderRegistry, ProviderSettings
from agent_core.provider.base import ProviderAdapter
from agent_core.tasks.client import TaskClient
from agent_core.tasks.tools import task_tools
from agent_core.tools import PermissionRules, Tool, ToolRegistry, Workspace
from agent_core.tools.projects import InvalidProjectError, normalize_project, project_dir
from agent_core.types.enums import PermissionPolicy
from agent_core.types.protocol import ToolDefinition
from agent_core.types.runtime import AgentConfig
from services.run_worker.adapters import WorkerToolRunner
from services.run_worker.child_tools import child_tools

__all__ = ["AgentSetup"]

log = logging.getLogger("soong.run_worker")


def provider_settings(
    config: AgentConfig, settings: Settings, env: Mapping[str, str]
) -> ProviderSettings:
    """How a run-worker reaches ``config``'s provider: its address, and its key from the
    variable the config names (resolved by kind when the configuration names none)."""
    api_key = env.get(config.api_key_env) if config.api_key_env else None
    return ProviderSettings(
        provider=config.provider,
        base_url=config.base_url,
        api_key=api_key or None,
        timeout_s=settings.model.timeout_s,
        provider_options=config.provider_options,
    )


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
        """The deployment's default model settings, with the run's overrides on top
        (:func:`agent_config`; raises :class:`ConfigError`)."""
        return agent_config(self.settings, overrides)

    def adapter(self, config: AgentConfig) -> ProviderAdapter:
        """One adapter per provider endpoint, reused across runs (its HTTP connections too).

        Raises :class:`ConfigError` when the provider is unknown or cannot be built."""
        key = (config.provider, config.base_url, config.api_key_env)
        adapter = self._adapters.get(key)
        if adapter is None:
            settings = provider_settings(config, self.settings, os.environ)
            try:
                raw = self.providers.create(settings)
                warm = getattr(raw, "warm_up", None)  # optional: in-process models have none
                if callable(warm):
                    warm()  # builds the SDK client (CPU only, no I/O): a bad endpoint fails here
            except ConfigError:
                raise
            except Exception as exc:
                raise ConfigError(
                    "provider_unavailable",
                    f"provider {config.provider!r} cannot be built: "
                    f"{type(exc).__name__}: {redact(str(exc))[:200]}",
                    details={"key": "model.provider", "value": config.provider},
                ) from exc
            adapter = InstrumentedAdapter(raw, config.provider)  # every model call measured
            self._adapters[key] = adapter
        return adapter

    def prepare(self) -> None:
        """Build the default model's adapter and those of the named providers, with their
        clients (importing a provider SDK takes a CPU-second): at start-up, not inside the first
        run. Raises :class:`ConfigError` when one is unknown, cannot be built or lacks the key it
        needs (``model_key_missing``, naming the variable) — the worker does not start with it."""
        demo = self.settings.model.provider == DEMO_PROVIDER
        check_model_keys(self.settings, os.environ, default_model=not demo)
        self.adapter(self.config({}))
        for name in self.settings.providers:
            self.adapter(self.config({"provider": name}))

    def project(self, cwd: str, workspace: Workspace) -> str:
        """The folder of the session's project for its task tools; ``""`` when the stored name is
        no longer usable (task-wal then refuses, and the task tools say so to the model)."""
        try:
            roots = self.settings.projects.roots
            return str(project_dir(cwd, roots=roots, workspace_root=workspace.root))
        except InvalidProjectError as exc:
            log.warning("session project %r is not usable: %s", cwd[:200], exc.message)
            return ""

    def task_scope(self, account_id: str, cwd: str) -> TaskScope | None:
        """The session's task scope (its project by logical name, never a folder); ``None`` when
        the stored name is no longer usable (the task tools then say so to the model)."""
        try:
            project = normalize_project(cwd, self.settings.projects.roots)
            return TaskScope(account_id=account_id, project=project)
        except (InvalidProjectError, ValidationError) as exc:
            log.warning("session project %r is not usable for task lists: %s", cwd[:200], exc)
            return None

    def registry(
        self,
        scope: TaskScope | None,
        children: Sequence[Tool[Any]] = (),
        *,
        orchestrator: bool = False,
    ) -> ToolRegistry:
        """The run's tools: the shared built-ins plus task tools bound to the session's project,
        and ``children`` (a parent's tools that start child runs; child runs get none). An
        orchestrator works through its workers: it gets no built-ins."""
        extra: list[Tool[Any]] = task_tools(self.task_client, scope=scope)
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
            registry = self.registry(None, tools, orchestrator=orchestrator)
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
