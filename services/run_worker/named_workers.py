"""Workers that run as a named agent: ``dispatch_worker(..., assistant=NAME)``.

An orchestrator (or any run that dispatches workers) may name an assistant of the session's
account for a worker; that child run then uses the assistant's definition — its config
(provider and model, tools, tool policy, limits) and its instructions as the system prompt —
instead of its parent's, resolved the same way a session made from it is
(``session_overrides`` + ``agent_config``). The latest version at the dispatch is used; the
child run's metadata and its ``child_run_started`` event name the assistant and the version.

A name the account does not have, or a definition this deployment cannot run, is the model's to
fix: a tool error, never a failed parent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent_core.bus.contracts.assistants import GetAssistant
from agent_core.errors import ConfigError, ToolError
from agent_core.hooks import RunHooks
from agent_core.provider.base import ProviderAdapter
from agent_core.runtime.ports import ToolRunner
from agent_core.skills import RunSkills
from agent_core.types.api import session_overrides
from agent_core.types.runtime import AgentConfig
from services.run_worker.adapters import BusRunStore
from services.run_worker.agent_setup import AgentSetup
from services.run_worker.reads import RunReads

__all__ = ["ChildSetup", "NamedSetup", "named_setup"]


@dataclass(frozen=True)
class ChildSetup:
    """What a child run runs with when it is not its parent's configuration."""

    config: AgentConfig
    model: ProviderAdapter
    # With the child's hooks and skills.
    tools: Callable[[BusRunStore, RunHooks | None, RunSkills | None], ToolRunner]
    label: dict[str, Any] = field(default_factory=dict)  # recorded on the child run


NamedSetup = Callable[[str], Awaitable[ChildSetup]]


def named_setup(
    reads: RunReads,
    setup: AgentSetup,
    account_id: str,
    tools_for: Callable[
        [AgentConfig], Callable[[BusRunStore, RunHooks | None, RunSkills | None], ToolRunner]
    ],
) -> NamedSetup:
    """Resolves an assistant name of ``account_id`` into a child's setup (scoped by the
    account: another account's assistants are not found)."""

    async def resolve(name: str) -> ChildSetup:
        assistant = await reads.read(GetAssistant(account_id=account_id, name=name))
        if assistant is None:
            raise ToolError("assistant_not_found", f"this account has no assistant named {name!r}")
        try:
            config = setup.config(session_overrides(assistant))
            model = setup.adapter(config)
        except ConfigError as exc:
            raise ToolError(
                "invalid_assistant", f"assistant {name!r} cannot run here: {exc.message}"
            ) from exc
        label = {"assistant": name, "assistant_version": assistant.version}
        return ChildSetup(config, model, tools_for(config), label)

    return resolve
