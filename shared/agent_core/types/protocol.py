"""Protocol types: what crosses the provider, tool and hook boundaries (layer 1 of three).

These types carry no SQLite fields and no official SDK types. Content blocks are one strict
discriminated union on ``type``; so are model events. Use :data:`CONTENT_BLOCKS` and
:data:`MODEL_EVENT` (``TypeAdapter``\\ s) to validate raw data.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from agent_core.errors import ProviderErrorPayload
from agent_core.types.enums import (
    HookDecision,
    HookPhase,
    InvalidToolCallReason,
    PermissionBehavior,
    Role,
    StopReason,
)

__all__ = [
    "CONTENT_BLOCKS",
    "MODEL_EVENT",
    "RAW_ARGUMENTS_MAX",
    "ArtifactRefBlock",
    "AttachmentBlock",
    "ContentBlock",
    "ErrorEvent",
    "HookInput",
    "HookOutput",
    "JsonBlock",
    "MessageEndEvent",
    "MediaPart",
    "MessageStartEvent",
    "ModelEvent",
    "ModelMessage",
    "ModelRequest",
    "NamedToolChoice",
    "PermissionDecision",
    "PermissionRequest",
    "SystemBlock",
    "TextBlock",
    "TextDeltaEvent",
    "ToolCall",
    "ToolCallBlock",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallInvalidEvent",
    "ToolCallStartEvent",
    "ToolChoice",
    "ToolDefinition",
    "ToolResult",
    "ToolResultBlock",
    "ToolResultContent",
    "Usage",
    "UsageEvent",
]


# What a stored invalid call keeps of its raw arguments (memory reads the first 2,000 of them).
RAW_ARGUMENTS_MAX = 4000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


# ---------------------------------------------------------------------------- content blocks


class TextBlock(_Strict):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


class JsonBlock(_Strict):
    """A JSON value; large ones are moved to an artifact and keep only a summary and the ref."""

    # The validator below, said in the schema: inline data or an artifact, never both.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"properties": {"artifact_id": {"type": "null"}}},
                {"properties": {"data": {"type": "null"}}},
            ]
        }
    )
    type: Literal["json"] = "json"
    data: Any = None
    summary: str | None = None
    artifact_id: str | None = None

    @model_validator(mode="after")
    def _data_or_artifact(self) -> JsonBlock:
        if self.artifact_id is not None and self.data is not None:
            raise ValueError("an artifact-backed json block keeps no inline data")
        return self


class ArtifactRefBlock(_Strict):
    """A reference to an artifact; path, size and provenance live in the artifacts table only."""

    type: Literal["artifact_ref"] = "artifact_ref"
    artifact_id: str
    summary: str | None = None
    mime_type: str | None = None
    filename: str | None = None


class AttachmentBlock(_Strict):
    """A file a user attached (uploaded into the session's ``input/``)."""

    type: Literal["attachment"] = "attachment"
    # Said in the schema; a message's validator refuses any other (a stored one never has one).
    path: str = Field(json_schema_extra={"pattern": "^input/"})
    filename: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = Field(default=None, ge=0)
    artifact_id: str | None = None


class ToolCallBlock(_Strict):
    """A tool call made by the assistant.

    ``raw_arguments``: set only on a call whose arguments were not a JSON object (it was never
    run; ``arguments`` stays empty): the text as the model wrote it, at most
    :data:`RAW_ARGUMENTS_MAX` characters, kept so that memory extraction can learn from the
    invalid call and the fixed one after it. Requests to models never carry it.
    """

    type: Literal["tool_call"] = "tool_call"
    id: str = Field(min_length=1, max_length=128)
    name: str = Field(min_length=1, max_length=128)
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = Field(default=None, max_length=RAW_ARGUMENTS_MAX)


ToolResultContent = Annotated[TextBlock | JsonBlock | ArtifactRefBlock, Field(discriminator="type")]


class ToolResultBlock(_Strict):
    """The result of one tool call; a failure is ``is_error=True`` (plus a ``tool_failed`` event)."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str = Field(min_length=1, max_length=128)
    content: list[ToolResultContent] = Field(default_factory=list)
    is_error: bool = False


ContentBlock = Annotated[
    TextBlock | JsonBlock | ToolCallBlock | ToolResultBlock | ArtifactRefBlock | AttachmentBlock,
    Field(discriminator="type"),
]
CONTENT_BLOCKS: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])


class SystemBlock(_Strict):
    """One block of the system prompt; ``cache`` marks a prompt-cache breakpoint where supported."""

    type: Literal["text"] = "text"
    text: str
    cache: bool = False


# ---------------------------------------------------------------------------- requests


class ModelMessage(_Strict):
    """One message to a model: a role and provider-neutral blocks."""

    role: Literal[Role.USER, Role.ASSISTANT, Role.TOOL]
    content: list[ContentBlock]


class ToolDefinition(_Strict):
    """A tool as the model sees it; ``input_schema`` is the JSON Schema of its input model."""

    name: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class NamedToolChoice(_Strict):
    """Force one named tool."""

    name: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$")


ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice


class MediaPart(_Strict):
    """The content of one attachment (or artifact handed back) as a request gives it to the model.

    Resolved from the session's files just before the request is sent (never stored): ``kind``
    ``image`` or ``pdf`` carries the bytes base64-encoded in ``data``; ``text`` carries the
    document's text itself. Each provider maps it onto its own part (``provider/media.py``).
    """

    kind: Literal["image", "pdf", "text"]
    mime_type: str = Field(min_length=1, max_length=255)
    data: str
    filename: str | None = None


class ModelRequest(_Strict):
    """A provider-neutral request for one streamed model response.

    ``media``: the content of the attachment and ``artifact_ref`` blocks of user messages, by
    :func:`agent_core.provider.media.media_key`; a block without an entry is sent as a short
    note (its file stays in the workspace for the tools).
    """

    model: str = Field(min_length=1)
    system: list[SystemBlock] = Field(default_factory=list)
    messages: list[ModelMessage]
    tools: list[ToolDefinition] = Field(default_factory=list)
    tool_choice: ToolChoice | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0)
    stop: list[str] | None = None
    provider_options: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    media: dict[str, MediaPart] = Field(default_factory=dict)


# ---------------------------------------------------------------------------- events


class Usage(_Strict):
    """Token usage; adding two usages sums every field.

    ``estimated``: the provider reported no usage for (at least one of) the model calls counted
    here (many local OpenAI-compatible servers send none), so the counts are, for those calls,
    the runtime's own estimates of the prompt it sent and of the answer it got (see
    ``agent_core.context.tokens``), not the provider's figures. A sum with an estimate in it is
    estimated.
    """

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            estimated=self.estimated or other.estimated,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


class MessageStartEvent(_Strict):
    """The provider started a response."""

    type: Literal["message_start"] = "message_start"
    model: str | None = None
    response_id: str | None = None


class TextDeltaEvent(_Strict):
    """A piece of assistant text (never splits a unicode character)."""

    type: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallStartEvent(_Strict):
    """A tool call began; ``index`` orders parallel calls within the response."""

    type: Literal["tool_call_start"] = "tool_call_start"
    index: int = Field(ge=0)
    id: str
    name: str


class ToolCallDeltaEvent(_Strict):
    """A fragment of a tool call's JSON arguments, as streamed."""

    type: Literal["tool_call_delta"] = "tool_call_delta"
    index: int = Field(ge=0)
    arguments_delta: str


class ToolCallEndEvent(_Strict):
    """A tool call is complete; ``arguments`` were parsed and validated as a JSON object."""

    type: Literal["tool_call_end"] = "tool_call_end"
    index: int = Field(ge=0)
    id: str
    name: str
    arguments: dict[str, Any]


class ToolCallInvalidEvent(_Strict):
    """A started tool call that must never run; it closes the call as ``tool_call_end`` would.

    ``invalid_arguments``: the arguments are not a JSON object (``error`` says why, for the
    model to fix). ``truncated``: the output limit cut them off (the response's stop reason is
    ``max_tokens``). ``raw_arguments`` is the text as the model wrote it; ``name`` is empty when
    the provider did not say which tool was called.
    """

    type: Literal["tool_call_invalid"] = "tool_call_invalid"
    index: int = Field(ge=0)
    id: str
    name: str
    reason: InvalidToolCallReason
    raw_arguments: str
    error: str


class UsageEvent(_Strict):
    """Token usage reported by the provider, as it becomes known.

    A response may report its usage in several events; each carries only what earlier ones did
    not, so the response's usage is their sum (and what was reported before a failure stays
    counted).
    """

    type: Literal["usage"] = "usage"
    usage: Usage


class MessageEndEvent(_Strict):
    """The response ended; ``raw_stop_reason`` keeps the provider's own word."""

    type: Literal["message_end"] = "message_end"
    stop_reason: StopReason
    raw_stop_reason: str | None = None


class ErrorEvent(_Strict):
    """The provider reported an error in the stream."""

    type: Literal["error"] = "error"
    error: ProviderErrorPayload


ModelEvent = Annotated[
    MessageStartEvent
    | TextDeltaEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | ToolCallInvalidEvent
    | UsageEvent
    | MessageEndEvent
    | ErrorEvent,
    Field(discriminator="type"),
]
MODEL_EVENT: TypeAdapter[ModelEvent] = TypeAdapter(ModelEvent)


# ---------------------------------------------------------------------------- tools, hooks, permissions


class ToolCall(_Strict):
    """A tool call to execute."""

    id: str = Field(min_length=1, max_length=128)
    name: str = Field(min_length=1, max_length=128)
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolResult(_Strict):
    """What a tool returned for one call."""

    tool_call_id: str
    content: list[ToolResultContent] = Field(default_factory=list)
    is_error: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)

    def to_block(self) -> ToolResultBlock:
        """The ``tool_result`` content block of this result."""
        return ToolResultBlock(
            tool_call_id=self.tool_call_id, content=list(self.content), is_error=self.is_error
        )


class HookInput(_Strict):
    """What a hook receives on stdin (JSON); fields an event has nothing for stay ``null``.

    Never holds the run's configuration or secrets: ids, the agent's kind, the project folder,
    and what the event is about (the tool call, its result, the prompt, the answer, the end).
    """

    phase: HookPhase
    session_id: str
    run_id: str | None = None
    agent_id: str | None = None
    # ``main``, ``orchestrator``, ``worker`` or ``fork``: the same hooks run for every kind.
    agent_type: str | None = None
    parent_run_id: str | None = None
    cwd: str | None = None  # the session's project folder (its workspace when it names none)
    tool_call: ToolCall | None = None
    tool_result: ToolResult | None = None
    prompt: str | None = None
    answer: str | None = None  # Stop: the answer the run would end with
    stop_hook_active: bool = False  # Stop: a Stop hook already kept this run going
    end_status: str | None = None  # RunEnd, SubagentStop
    end_reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class HookOutput(_Strict):
    """What a hook answers on stdout (JSON, or nothing). Each event takes only some fields
    (README, "Hooks"); one it does not take makes the output invalid."""

    decision: HookDecision | None = None
    reason: str | None = Field(default=None, max_length=10_000)
    additional_context: str | None = Field(default=None, max_length=50_000)
    updated_arguments: dict[str, Any] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class PermissionRequest(_Strict):
    """A tool call waiting for a permission decision."""

    request_id: str
    session_id: str
    run_id: str
    agent_id: str
    tool_call: ToolCall
    reason: str | None = None
    # When the request is denied if nobody has decided it (``run_worker.permission_timeout_s``).
    expires_at: AwareDatetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # The tool's input schema (JSON Schema): a person may approve the call with edited
    # arguments, which the gateway checks against it (and the tool again before it runs).
    input_schema: dict[str, Any] | None = None


class PermissionDecision(_Strict):
    """The answer to one :class:`PermissionRequest`."""

    request_id: str
    behavior: PermissionBehavior
    reason: str | None = None
    decided_by: str | None = None
    # Approved with edited arguments: the call runs with these instead of the model's.
    arguments: dict[str, Any] | None = None
