"""What a tool is: a name, a pydantic input model (its JSON Schema is the provider schema), a run.

A tool never talks to the model directly: it returns a :class:`ToolOutput` or raises an
``AgentCoreError`` (``ToolError``, a path error, ``PermissionDeniedError``), and the executor turns
either into a ``ToolResult``. Anything else a tool raises is a bug, reported as an internal error
result without crashing the run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from agent_core.tools.workspace import Workspace
from agent_core.types.protocol import ToolDefinition

__all__ = ["ArgsT", "Tool", "ToolArgs", "ToolContext", "ToolOutput"]


class ToolArgs(BaseModel):
    """Base of tool input models: unknown arguments are an error the model is told about."""

    model_config = ConfigDict(extra="forbid")


ArgsT = TypeVar("ArgsT", bound=ToolArgs)


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What one tool call may use: the session workspace and who is calling."""

    workspace: Workspace
    tool_call_id: str
    session_id: str
    run_id: str
    agent_id: str
    node_id: str | None = None


@dataclass(slots=True)
class ToolOutput:
    """A tool's answer: text for the model, whether it is an error, and metadata for the timeline."""

    text: str
    is_error: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


class Tool(ABC, Generic[ArgsT]):
    """One tool. Subclasses set ``name``, ``description``, ``input_model`` and implement ``run``.

    ``writes`` marks tools that change files (the executor then looks for new files in
    ``output/`` to register as artifacts); ``timeout_s`` bounds one call. ``repeatable`` declares
    a tool read-only or idempotent: a run whose worker was lost while it ran resumes and runs the
    call again; a tool with side effects (the default) ends such a run ``worker_lost`` instead.
    ``asks_first`` declares a tool whose effect reaches past the session (publishing, sending):
    a person is asked before each call unless the agent's policy names the tool itself.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    input_model: type[ArgsT]
    timeout_s: ClassVar[float] = 30.0
    writes: ClassVar[bool] = False
    repeatable: ClassVar[bool] = False
    asks_first: ClassVar[bool] = False

    def definition(self) -> ToolDefinition:
        """The provider-facing definition: the input model's JSON Schema, without titles."""
        schema = self.input_model.model_json_schema()
        # Titles and the model's docstring only repeat the tool's name and description.
        schema.pop("title", None)
        schema.pop("description", None)
        for prop in schema.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        _drop_size_limits(schema)
        return ToolDefinition(name=self.name, description=self.description, input_schema=schema)

    def timeout_for(self, args: ArgsT) -> float:
        """The time limit of one call with these arguments."""
        return self.timeout_s

    @abstractmethod
    async def run(self, args: ArgsT, ctx: ToolContext) -> ToolOutput:
        """Do the work; raise ``AgentCoreError`` subclasses for failures the model should see."""


# Size limits in the schema a model sees help it no more than the description does, and servers
# that compile tool schemas into grammars for constrained decoding (llama.cpp's) build one state
# per allowed character: ``maxLength: 1000000`` runs them out of memory. The limits stay where they
# hold, in the input model the executor validates every call against (a call over one gets an
# error result naming the field).
_SIZE_LIMITS = ("maxLength", "maxItems", "maxProperties")


def _drop_size_limits(node: object, *, named: bool = False) -> None:
    """Remove every size limit from a JSON Schema, nested ones included (in place). ``named``:
    ``node`` maps names to schemas (``properties``, ``$defs``), so its keys are not keywords."""
    if isinstance(node, dict):
        if not named:
            for key in _SIZE_LIMITS:
                node.pop(key, None)
        for key, value in node.items():
            _drop_size_limits(value, named=not named and key in ("properties", "$defs"))
    elif isinstance(node, list):
        for value in node:
            _drop_size_limits(value)
