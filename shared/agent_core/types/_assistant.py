"""Named agents (assistants): a reusable, versioned agent definition of one account.

Private: import these names from :mod:`agent_core.types.api`. One model per entity: the
definition (:class:`AssistantDefinition`) is what every version stores, what a create or a full
update sends, and the body of the view (:class:`Assistant`), which adds the server's fields.

The agent-config part is an :class:`AgentConfigOverrides`, so the same checks apply as to a
session's ``agent_config``, and a definition becomes a session's stored overrides with
:func:`session_overrides` (its ``instructions`` as the ``system_prompt``). A session made from a
definition may override only the fields the definition lists in ``overridable``
(:func:`refused_overrides`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, ValidationError, model_validator

from agent_core.types._agent_config import AgentConfigOverrides
from agent_core.types._fields import Strict, UtcDatetime

__all__ = [
    "ASSISTANT_KEY",
    "ASSISTANT_NAME_PATTERN",
    "DEFAULT_OVERRIDABLE",
    "Assistant",
    "AssistantDefinition",
    "AssistantName",
    "AssistantPin",
    "OverridableField",
    "refused_overrides",
    "session_overrides",
]

# The key of a session's metadata under which the assistant it was made from is pinned (beside
# ``SESSION_CONFIG_KEY``; reserved the same way, kept by metadata updates).
ASSISTANT_KEY: Final = "assistant"

# A name is a handle people type: letters, digits, ``_ . -``; never an id's shape (``asst_…``),
# so ``/v1/assistants/{name_or_id}`` is never ambiguous.
ASSISTANT_NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def _not_an_id(name: str) -> str:
    if name.startswith("asst_"):
        raise ValueError("a name cannot start with asst_ (the ids' prefix)")
    return name


AssistantName = Annotated[str, Field(pattern=ASSISTANT_NAME_PATTERN), AfterValidator(_not_an_id)]

# The fields of AgentConfigOverrides a definition may let a session change.
OverridableField = Literal[
    "provider",
    "model",
    "max_turns",
    "budget",
    "tool_policy",
    "enabled_tools",
    "enabled_skills",
    "system_prompt",
    "temperature",
    "tool_choice",
    "max_output_tokens",
]
DEFAULT_OVERRIDABLE: Final[tuple[OverridableField, ...]] = ("model", "temperature", "max_turns")


class AssistantDefinition(Strict):
    """What one version of an assistant holds.

    ``config`` is the agent config (provider by name, model, tools, skills, tool policy, limits);
    ``instructions`` is its system prompt, given here and not as ``config.system_prompt``.
    ``overridable`` names the config fields a session made from it may change.
    """

    description: str = Field(default="", max_length=2_000)
    instructions: str | None = Field(default=None, max_length=100_000)
    config: AgentConfigOverrides = Field(
        default_factory=AgentConfigOverrides,
        # the validator below, said in the schema: the prompt is ``instructions``
        json_schema_extra={"properties": {"system_prompt": {"type": "null"}}},
    )
    overridable: list[OverridableField] = Field(
        default_factory=lambda: list(DEFAULT_OVERRIDABLE), max_length=16
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _instructions_once(self) -> AssistantDefinition:
        if self.config.system_prompt is not None:
            raise ValueError("give the system prompt as instructions, not config.system_prompt")
        self.overridable = sorted(set(self.overridable))
        return self


class Assistant(AssistantDefinition):
    """An assistant as the API shows it: one version of its definition and where it stands.

    ``version`` is the version shown (the latest unless another was asked for);
    ``latest_version`` the newest. Every update makes a new version; old ones stay readable.
    """

    assistant_id: str
    name: str
    version: int = Field(ge=1)
    latest_version: int = Field(ge=1)
    status: Literal["active", "archived"]
    created_at: UtcDatetime
    updated_at: UtcDatetime

    def definition(self) -> AssistantDefinition:
        """The definition part alone (what an update starts from)."""
        return AssistantDefinition.model_validate(
            self.model_dump(include=set(AssistantDefinition.model_fields))
        )


class AssistantPin(Strict):
    """What a session made from an assistant keeps (metadata ``ASSISTANT_KEY``): which version
    it started with and what it may still override; later versions never change it."""

    assistant_id: str
    name: str
    version: int = Field(ge=1)
    overridable: list[OverridableField]

    @classmethod
    def of(cls, metadata: Mapping[str, Any]) -> AssistantPin | None:
        """The pin a session's metadata holds, or ``None`` for a session made without one."""
        pin = metadata.get(ASSISTANT_KEY)
        if not isinstance(pin, dict):
            return None
        try:
            return cls.model_validate(pin)
        except ValidationError:  # only the server writes it; a damaged one pins nothing
            return None

    def names(self, ref: str) -> bool:
        """Whether ``ref`` (an assistant's name or id) is the assistant this pin is to."""
        return ref in (self.name, self.assistant_id)


def session_overrides(definition: AssistantDefinition) -> dict[str, Any]:
    """The definition as a session's stored agent-config overrides (``AgentConfig`` input)."""
    values = definition.config.overrides()
    if definition.instructions is not None:
        values["system_prompt"] = definition.instructions
    return values


def refused_overrides(
    overridable: list[OverridableField], overrides: AgentConfigOverrides | None
) -> list[str]:
    """The fields ``overrides`` sets that ``overridable`` does not allow, sorted."""
    if overrides is None:
        return []
    return sorted(set(overrides.overrides()) - set(overridable))
