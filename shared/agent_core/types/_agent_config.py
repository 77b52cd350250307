"""How an agent runs: model, limits, tools, skills and prompt.

Private: import these names from :mod:`agent_core.types.runtime`. Pure data: the provider key is
resolved by the provider registry, the tool policy is applied by the tools layer, budgets are
enforced by the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import Field, model_validator

from agent_core.types._fields import NotBool, Strict
from agent_core.types.enums import PermissionPolicy
from agent_core.types.protocol import ToolChoice

__all__ = [
    "SESSION_CONFIG_KEY",
    "AgentConfig",
    "AgentConfigOverrides",
    "ContextPolicy",
    "RunBudget",
    "ToolPolicy",
    "merge_overrides",
    "overrides_from",
]

# The key of a session's metadata under which its agent config overrides are kept (set through the
# API's ``agent_config``, never as plain metadata); every run of the session starts from them.
SESSION_CONFIG_KEY: Final = "agent_config"


class ToolPolicy(Strict):
    """Which tool calls run without asking.

    Entries are tool names. Precedence when a name is listed more than once: ``deny`` over ``ask``
    over ``allow``; a name in no list gets ``default``.
    """

    default: PermissionPolicy = PermissionPolicy.ASK
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)

    def policy_for(self, tool_name: str) -> PermissionPolicy:
        """The policy that applies to ``tool_name`` under the precedence above."""
        if tool_name in self.deny:
            return PermissionPolicy.DENY
        if tool_name in self.ask:
            return PermissionPolicy.ASK
        if tool_name in self.allow:
            return PermissionPolicy.ALLOW
        return self.default


class RunBudget(Strict):
    """Limits of one run beyond ``max_turns``; ``None`` means unlimited."""

    max_total_tokens: Annotated[int | None, NotBool] = Field(default=None, gt=0)
    max_wall_clock_s: Annotated[float | None, NotBool] = Field(default=None, gt=0)


class ContextPolicy(Strict):
    """How a run keeps its context within the model's window (``docs/architecture.md``,
    "Context budget and compaction").

    ``compact_at``: the share of the input budget (window minus the output reserve) past which
    the older part of the path is summarized; ``keep_recent``: the share of it kept verbatim after
    a compaction. The summary is written by its own model call: ``summary_model`` (``None``: the
    agent's model), at most ``summary_max_tokens`` long, within ``summary_timeout_s``, reading at
    most ``summary_window`` tokens at once (``None``: that model's known window) — larger input is
    summarized in chunks. ``max_continuations``: how often an answer cut by the output limit is
    asked to continue before the run ends ``max_output_tokens_recovery``. ``tool_share``: the most
    of the input budget the tool definitions may take; past it (a small window) a request carries
    the tools already called, then ``small_window_tools`` in their order, then the others by
    relevance to the newest message, as many as fit (``agent_core.context.tool_choice``).
    """

    compact_at: Annotated[float, NotBool] = Field(default=0.8, ge=0.2, le=0.95)
    keep_recent: Annotated[float, NotBool] = Field(default=0.3, ge=0.05, le=0.6)
    summary_model: str | None = Field(default=None, min_length=1, max_length=200)
    summary_max_tokens: Annotated[int, NotBool] = Field(default=2048, ge=64, le=32_000)
    summary_timeout_s: Annotated[float, NotBool] = Field(default=120.0, gt=0, le=3600)
    summary_window: Annotated[int | None, NotBool] = Field(default=None, ge=1024)
    max_continuations: Annotated[int, NotBool] = Field(default=2, ge=0, le=20)
    tool_share: Annotated[float, NotBool] = Field(default=0.25, ge=0.05, le=1.0)
    small_window_tools: list[Annotated[str, Field(min_length=1, max_length=128)]] | None = Field(
        default=None, max_length=200
    )


class AgentConfig(Strict):
    """The configuration of one agent's runs.

    ``provider`` is a provider registry key (``openai``, ``anthropic``, ``ollama`` or a custom one);
    an unknown key is a ``ConfigError`` when the registry resolves it, not here. The API key itself
    is never part of the config: ``api_key_env`` names the environment variable that holds it.
    ``enabled_tools`` / ``enabled_skills`` of ``None`` mean every registered tool / skill.
    ``tool_choice`` (``None``: the provider's default, ``auto``) holds for a run's model calls
    until its first tool call, after which the model chooses again: a forced call would otherwise
    be repeated until ``max_turns``. ``{"name": …}`` forces that tool (the request carries it
    even when a small window leaves other tools out), ``required`` some tool, ``none`` none.
    Ollama cannot force a tool: there it reads as ``auto``.
    """

    provider: str = Field(min_length=1, max_length=64)
    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    max_turns: int = Field(default=50, ge=1)
    budget: RunBudget = Field(default_factory=RunBudget)
    tool_policy: ToolPolicy = Field(default_factory=ToolPolicy)
    enabled_tools: list[str] | None = None
    enabled_skills: list[str] | None = None
    allow_platform_writes: bool = False
    system_prompt: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    tool_choice: ToolChoice | None = None
    max_output_tokens: int | None = Field(default=None, gt=0)
    # The model's context window in tokens (None: the known default of the model's name).
    context_window: int | None = Field(default=None, ge=1024)
    context: ContextPolicy = Field(default_factory=ContextPolicy)
    provider_options: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # The attachments the model takes as content (``[model] accepts``; None: its provider
    # kind's default). Set from the deployment's configuration, never by a client.
    accepts: list[Literal["image", "pdf"]] | None = None

    @model_validator(mode="after")
    def _output_within_budget(self) -> AgentConfig:
        # One response can never be larger than the whole run's budget: the budget is then the
        # output limit (a limit past it would only be cut by the budget's end anyway).
        total = self.budget.max_total_tokens
        if total is not None and self.max_output_tokens is not None:
            self.max_output_tokens = min(self.max_output_tokens, total)
        return self


class AgentConfigOverrides(Strict):
    """What a client may change of an agent's config (no endpoint or key variable).

    ``provider`` names one of the providers the deployment serves (a ``[providers.<name>]``
    endpoint or the ``[model]`` section's provider); another is refused (``unknown_provider``)
    before any run exists, as is a model a named endpoint does not list (``unknown_model``).
    """

    provider: str | None = Field(default=None, min_length=1, max_length=64)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    max_turns: Annotated[int | None, NotBool] = Field(default=None, ge=1, le=1000)
    budget: RunBudget | None = None
    tool_policy: ToolPolicy | None = None
    enabled_tools: list[Annotated[str, Field(max_length=128)]] | None = Field(
        default=None, max_length=256
    )
    enabled_skills: list[Annotated[str, Field(max_length=128)]] | None = Field(
        default=None, max_length=256
    )
    system_prompt: str | None = Field(default=None, max_length=100_000)
    temperature: Annotated[float | None, NotBool] = Field(default=None, ge=0, le=2)
    tool_choice: ToolChoice | None = None
    max_output_tokens: Annotated[int | None, NotBool] = Field(default=None, gt=0, le=1_000_000)
    context_window: Annotated[int | None, NotBool] = Field(default=None, ge=1024, le=10_000_000)
    context: ContextPolicy | None = None

    def overrides(self) -> dict[str, Any]:
        """The fields that were set, as ``AgentConfig`` input.

        Nested fields left out stay out (``{"tool_policy": {"ask": [...]}}`` names no
        ``default``): a layer below keeps them (see :func:`merge_overrides`).
        """
        return self.model_dump(mode="json", exclude_none=True, exclude_unset=True)


# Fields whose value is merged key by key across layers rather than replaced whole: a policy that
# lists only the tools to ask about keeps the default of the layer below for every other tool.
_MERGED_FIELDS: Final = ("tool_policy",)


def merge_overrides(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """``AgentConfig`` input of ``layers``, each on top of the ones before it.

    A field replaces the same field below, except ``tool_policy``, whose keys (``default``,
    ``allow``, ``ask``, ``deny``) each replace their own: listing tools to ask about does not
    make every unlisted tool ask too.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        for name, value in layer.items():
            below = merged.get(name)
            if name in _MERGED_FIELDS and isinstance(below, dict) and isinstance(value, dict):
                merged[name] = {**below, **value}
            else:
                merged[name] = value
    return merged


def overrides_from(stored: Any) -> dict[str, Any]:
    """The overrides of a stored ``SESSION_CONFIG_KEY`` value; ``{}`` for none, or for a value
    written under older rules (ignored rather than failing every run of the session)."""
    if not isinstance(stored, dict):
        return {}
    try:
        return AgentConfigOverrides.model_validate(stored).overrides()
    except ValueError:
        return {}
