"""Request and response bodies of the HTTP API that are not runtime types themselves.

Shared by the gateway (which validates requests and serialises responses with them) and the client
SDK ``soong_agent`` (which parses responses with them), so the two cannot drift apart.
Responses reuse the runtime views (:class:`SessionState`, :class:`RunState`, :class:`Node`, …)
so the API and the library describe a thing once. Requests are strict (``extra="forbid"``):
server-owned fields such as ``account_id``, ``status`` of a run or a provider's ``base_url``
cannot be set by a client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from agent_core.types._assistant import (
    ASSISTANT_KEY,
    Assistant,
    AssistantDefinition,
    AssistantName,
    AssistantPin,
    OverridableField,
    refused_overrides,
    session_overrides,
)
from agent_core.types._fields import NotBool
from agent_core.types._usage import FileChange, RunFiles, UsageReport, UsageRow, UsageTotals
from agent_core.types.api_sessions import (
    AuditEvent,
    AuditList,
    ModelContext,
    SessionDeleted,
    SessionExport,
    SessionMatch,
)
from agent_core.types.enums import (
    MultitaskStrategy,
    NodeType,
    PermissionBehavior,
    Role,
    SessionStatus,
)
from agent_core.types.protocol import (
    ArtifactRefBlock,
    AttachmentBlock,
    JsonBlock,
    PermissionRequest,
    TextBlock,
)
from agent_core.types.runtime import (
    SESSION_CONFIG_KEY,
    AgentConfigOverrides,
    AgentState,
    ArtifactRef,
    Node,
    RunState,
    SessionState,
    TimelineEvent,
    overrides_from,
)

__all__ = [
    "ASSISTANT_KEY",
    "FileChange",
    "RunFiles",
    "UsageReport",
    "UsageRow",
    "UsageTotals",
    "AgentConfigOverrides",
    "AgentList",
    "Assistant",
    "AssistantDefinition",
    "AssistantList",
    "AssistantPin",
    "AssistantVersion",
    "AssistantVersions",
    "AuditEvent",
    "AuditList",
    "CreateAssistantRequest",
    "ArtifactList",
    "CreateSessionRequest",
    "EventList",
    "FileEntry",
    "FileList",
    "Health",
    "MessageAccepted",
    "ModelContext",
    "NodePath",
    "OverridableField",
    "PatchAssistantRequest",
    "PatchSessionRequest",
    "PermissionDecisionRequest",
    "PermissionList",
    "PostMessageRequest",
    "ROOT_PARENT",
    "Readiness",
    "RegenerateRequest",
    "RunList",
    "SessionDeleted",
    "SessionExport",
    "SessionList",
    "SessionMatch",
    "SwitchNodeRequest",
    "Tree",
    "TreeNode",
    "UploadedFile",
    "UploadedFiles",
    "UserBlock",
    "refused_overrides",
    "session_overrides",
    "stored_overrides",
]

RESERVED_METADATA_KEY = SESSION_CONFIG_KEY
# ``parent_node_id`` naming no node: the message starts a new root of the tree (it replaces the
# session's first message, which stays in the tree beside it).
ROOT_PARENT = "root"
# Keys of a session's metadata that only the server writes (and metadata updates keep).
RESERVED_METADATA_KEYS = (SESSION_CONFIG_KEY, ASSISTANT_KEY)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


def stored_overrides(metadata: dict[str, Any]) -> dict[str, Any]:
    """The agent config overrides kept in a session's metadata (ignored if no longer valid)."""
    return overrides_from(metadata.get(RESERVED_METADATA_KEY))


def _no_reserved(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    for key in RESERVED_METADATA_KEYS:
        if metadata is not None and key in metadata:
            raise ValueError(f"metadata key {key!r} is reserved; use {key} instead")
    return metadata


# What the model validators below refuse, said in the schema too (a client generated from the
# document, or a schema fuzzer, then never sends a body the server must refuse).
_RESERVED: JsonDict = {"propertyNames": {"not": {"enum": list(RESERVED_METADATA_KEYS)}}}


class CreateSessionRequest(_Body):
    """A new session; every field is optional."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"metadata": {"title": "report"}, "agent_config": {"max_turns": 8}}],
            # assistant_version needs assistant
            "anyOf": [
                {"properties": {"assistant_version": {"type": "null"}}},
                {"required": ["assistant"], "properties": {"assistant": {"type": "string"}}},
            ],
        },
    )
    cwd: str | None = Field(
        default=None,
        max_length=1024,
        description="The session's project: `workspace` (default, its own workspace), the name "
        "of a project root the operator configured, or `<root>/<folder>` below one. Never an "
        "absolute path: the server owns its paths, and answers show this logical name.",
    )
    metadata: dict[str, Any] = Field(default_factory=dict, json_schema_extra=_RESERVED)
    agent_config: AgentConfigOverrides | None = None
    assistant: str | None = Field(
        default=None,
        max_length=64,
        description="Start from this named agent of the account (its name or id): the session "
        "runs with its definition, pinned to its latest version (or `assistant_version`); "
        "`agent_config` may then set only the fields the definition lists as overridable.",
    )
    assistant_version: Annotated[int | None, NotBool] = Field(default=None, ge=1)
    mode: Literal["agent", "orchestrator"] = Field(
        default="agent",
        description="`orchestrator`: the session's root agent plans and delegates — it gets only "
        "the tools that start worker sub-agents and forks and the task tools, and its workers do "
        "the work with the session's tools.",
    )

    @model_validator(mode="after")
    def _reserved(self) -> CreateSessionRequest:
        _no_reserved(self.metadata)
        if self.assistant_version is not None and self.assistant is None:
            raise ValueError("assistant_version needs assistant")
        return self


class PatchSessionRequest(_Body):
    """Archive/unarchive a session or replace its metadata."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"status": "archived"}]}
    )
    status: SessionStatus | None = None
    metadata: dict[str, Any] | None = Field(default=None, json_schema_extra=_RESERVED)

    @model_validator(mode="after")
    def _reserved(self) -> PatchSessionRequest:
        _no_reserved(self.metadata)
        return self


class SessionList(_Body):
    """A page of sessions, newest first; pass ``next_cursor`` as ``cursor`` for the next page.

    A search (``q``) answers the best matches in one page, by their newest matching text, with
    ``matches`` saying where each matched (same order as ``items``)."""

    items: list[SessionState]
    next_cursor: str | None = None
    matches: list[SessionMatch] | None = None


# ``artifact_ref``: hand an earlier output of the session back to the agent (the gateway checks
# that the artifact is the session's); it reaches the model as an attachment does.
UserBlock = Annotated[
    TextBlock | JsonBlock | AttachmentBlock | ArtifactRefBlock, Field(discriminator="type")
]


class PostMessageRequest(_Body):
    """A user message: ``text`` or ``content`` blocks (not both)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"text": "Summarise input/report.pdf"},
                {"content": [{"type": "text", "text": "again"}], "multitask_strategy": "reject"},
            ],
            # exactly one of text or content
            "oneOf": [
                {
                    "required": ["text"],
                    "properties": {"text": {"type": "string"}, "content": {"type": "null"}},
                },
                {
                    "required": ["content"],
                    "properties": {"content": {"type": "array"}, "text": {"type": "null"}},
                },
            ],
        },
    )
    text: str | None = Field(default=None, max_length=1_000_000)
    content: list[UserBlock] | None = Field(default=None, min_length=1, max_length=256)
    parent_node_id: str | None = Field(
        default=None,
        max_length=80,
        description="branch from this node instead of the active one, or `root` to replace the "
        "first message; it must be a node a conversation can go on from (an answer, or a turn "
        "whose tool calls all have results, of the main agent): 422 `invalid_parent` otherwise",
    )
    multitask_strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE
    stream: bool = Field(
        default=False, strict=True, description="answer with the run's event stream (SSE)"
    )
    agent_config: AgentConfigOverrides | None = None

    @model_validator(mode="after")
    def _one_of(self) -> PostMessageRequest:
        if (self.text is None) == (self.content is None):
            raise ValueError("give exactly one of text or content")
        for block in self.content or []:
            if isinstance(block, AttachmentBlock) and not block.path.startswith("input/"):
                raise ValueError("attachments must live in input/")
        return self

    def blocks(self) -> list[UserBlock]:
        """The message as content blocks."""
        return list(self.content) if self.content is not None else [TextBlock(text=self.text or "")]


class RegenerateRequest(_Body):
    """Answer a user message again: a new run from the same message, beside the earlier answer."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{}, {"multitask_strategy": "reject"}]}
    )
    multitask_strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE
    stream: bool = Field(
        default=False, strict=True, description="answer with the run's event stream (SSE)"
    )
    agent_config: AgentConfigOverrides | None = None


class MessageAccepted(_Body):
    """A queued run: follow it at ``events_url``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "session_id": "sess_20260101_120000_0123456789abcdef",
                    "run_id": "run_0123456789abcdef",
                    "node_id": "node_0123456789abcdef",
                    "kind": "main",
                    "events_url": "/v1/sessions/sess_20260101_120000_0123456789abcdef/runs/"
                    "run_0123456789abcdef/events",
                }
            ]
        },
    )
    session_id: str
    run_id: str
    node_id: str
    kind: Literal["main", "branch"]
    events_url: str


class RunList(_Body):
    """Runs of a session, oldest first."""

    items: list[RunState]


class TreeNode(_Body):
    """One node of the compact tree."""

    node_id: str
    node_seq: int
    parent_id: str | None = None
    agent_id: str
    run_id: str | None = None
    role: Role
    node_type: NodeType
    preview: str


class Tree(_Body):
    """The session's node tree (compact) and its active node."""

    session_id: str
    active_node_id: str | None = None
    nodes: list[TreeNode]


class NodePath(_Body):
    """Nodes with their full content from the root (or after ``after_node_id``) to a node."""

    session_id: str
    active_node_id: str | None = None
    items: list[Node]


class SwitchNodeRequest(_Body):
    """Make ``node_id`` the active node: the next message continues from it."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"node_id": "node_0123456789abcdef"}]}
    )
    node_id: str = Field(min_length=1, max_length=80)


class EventList(_Body):
    """Timeline events with ``seq`` greater than ``after_seq``; continue from ``next_after_seq``."""

    items: list[TimelineEvent]
    next_after_seq: int | None = None


class AgentList(_Body):
    """Agents of a session."""

    items: list[AgentState]


class ArtifactList(_Body):
    """Artifacts of a session."""

    items: list[ArtifactRef]


class PermissionDecisionRequest(_Body):
    """Allow or deny one pending tool call."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"behavior": "allow"},
                {"behavior": "deny", "reason": "no"},
                {"behavior": "allow", "arguments": {"path": "output/safe.txt", "content": "x"}},
            ]
        },
    )
    behavior: PermissionBehavior
    reason: str | None = Field(default=None, max_length=2000)
    arguments: dict[str, Any] | None = Field(
        default=None,
        description="with allow: run the call with these arguments instead of the model's "
        "(checked against the tool's input schema, the request's input_schema); a deny runs "
        "nothing, so it ignores them",
    )


class FileEntry(_Body):
    """A file of the session workspace."""

    path: str = Field(description="relative to the session workspace, e.g. output/report.md")
    size_bytes: int
    modified_at: datetime = Field(description="last change, ISO 8601 in UTC")


class FileList(_Body):
    """Files of the workspace areas asked for, by area then path."""

    items: list[FileEntry]


class UploadedFile(_Body):
    """Where an upload landed."""

    path: str
    size_bytes: int


class UploadedFiles(_Body):
    """Where each file of a multipart upload landed, in the order they were sent."""

    items: list[UploadedFile]


class Health(_Body):
    """Liveness: the process is up."""

    status: str


class Readiness(_Body):
    """Readiness: the bus answers and every service answered its ping."""

    ready: bool
    bus: bool
    services: dict[str, bool]


class PermissionList(_Body):
    """Permission requests that wait for a decision; each says when it is denied
    (``expires_at``) if nobody decides it."""

    items: list[PermissionRequest]


class CreateAssistantRequest(AssistantDefinition):
    """A new named agent of the account (version 1)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "reviewer",
                    "description": "Reviews patches",
                    "instructions": "You review code changes. Be brief.",
                    "config": {"model": "gpt-4o-mini", "enabled_tools": ["read_file", "grep"]},
                    "overridable": ["model", "temperature"],
                }
            ]
        },
    )
    name: AssistantName


class PatchAssistantRequest(_Body):
    """Change some fields of an assistant's definition (a new version; the others are kept).

    Each field given replaces that field whole: ``config`` is the new config, not merged into
    the old one field by field."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"instructions": "Be briefer."}]}
    )
    description: str | None = Field(default=None, max_length=2_000)
    instructions: str | None = Field(default=None, max_length=100_000)
    config: AgentConfigOverrides | None = Field(
        default=None, json_schema_extra={"properties": {"system_prompt": {"type": "null"}}}
    )
    overridable: list[OverridableField] | None = Field(default=None, max_length=16)
    metadata: dict[str, Any] | None = None

    def apply(self, current: AssistantDefinition) -> AssistantDefinition:
        """``current`` with the fields given here replaced (validated as a whole again); a
        field given as ``null`` is left as it was."""
        changed = self.model_dump(exclude_unset=True, exclude_none=True, mode="json")
        return AssistantDefinition.model_validate({**current.model_dump(mode="json"), **changed})


class AssistantList(_Body):
    """The account's assistants, by name (archived ones only when asked for)."""

    items: list[Assistant]


class AssistantVersion(_Body):
    """One stored version of an assistant."""

    version: int
    created_at: str


class AssistantVersions(_Body):
    """Every version of an assistant, oldest first (each readable with ``?version=N``)."""

    assistant_id: str
    items: list[AssistantVersion]
