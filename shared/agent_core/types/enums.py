"""Shared string enums. Their values are what SQLite, JSON and WAL records store."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "RUN_END_EVENTS",
    "TERMINAL_RUN_EVENTS",
    "TERMINAL_RUN_STATUSES",
    "AgentStatus",
    "AgentType",
    "ContentBlockType",
    "EndReason",
    "EventLevel",
    "EventType",
    "HookDecision",
    "HookPhase",
    "InvalidToolCallReason",
    "MultitaskStrategy",
    "NodeType",
    "PermissionBehavior",
    "PermissionPolicy",
    "Role",
    "RunStatus",
    "SessionStatus",
    "StopReason",
]


class SessionStatus(StrEnum):
    """``sessions.status``."""

    ACTIVE = "active"
    ARCHIVED = "archived"


class AgentStatus(StrEnum):
    """``agents.status``."""

    IDLE = "idle"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class RunStatus(StrEnum):
    """``runs.status``: ``queued → running → completed | failed | aborted | cancelled``.

    ``pending`` is a run that was accepted but waits on something outside the queue (a permission
    decision, a parent run); it may go back to ``running``.
    """

    QUEUED = "queued"
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    ABORTED = "aborted"
    CANCELLED = "cancelled"


TERMINAL_RUN_STATUSES: frozenset[RunStatus] = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.ABORTED, RunStatus.CANCELLED}
)
"""The statuses a run ends in; a run in one never changes again (declared once: every other
"has it ended" test reads this set or :data:`TERMINAL_RUN_EVENTS`)."""


class EndReason(StrEnum):
    """``runs.end_reason``: stable, high-level; details go to ``error_json`` and events."""

    COMPLETED = "completed"
    MAX_TURNS = "max_turns"
    ABORTED_STREAMING = "aborted_streaming"
    ABORTED_TOOLS = "aborted_tools"
    PROMPT_TOO_LONG = "prompt_too_long"
    MAX_OUTPUT_TOKENS_RECOVERY = "max_output_tokens_recovery"
    FAILED = "failed"
    # The account's token budget ([budgets]) is used up: the run ends failed, error
    # ``budget_exhausted`` (how much of which budget), before or after a model turn.
    BUDGET_EXHAUSTED = "budget_exhausted"


class AgentType(StrEnum):
    """``agents.agent_type``; the purpose (compact, worker, review, …) is in metadata."""

    MAIN = "main"
    ORCHESTRATOR = "orchestrator"
    SUB = "sub"
    FORK = "fork"


class Role(StrEnum):
    """Provider-level role of a node."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class NodeType(StrEnum):
    """Core-level meaning of a node."""

    MESSAGE = "message"
    SKILL_CONTEXT = "skill_context"
    MEMORY_CONTEXT = "memory_context"
    COMPACTION = "compaction"
    CHILD_RESULT = "child_result"
    PLAN_INSTRUCTION = "plan_instruction"
    TASK_INSTRUCTION = "task_instruction"
    TASK_BOARD = "task_board"
    SYSTEM_NOTE = "system_note"


class EventLevel(StrEnum):
    """``events.level``."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class EventType(StrEnum):
    """``events.event_type``: the durable timeline vocabulary. Every member is written by some
    path (``tests/unit/types/test_event_writers.py``); a run's usage is on its row and its
    terminal event, its fatal error is ``run_error`` (the stream's ``usage`` and ``error`` frames
    have no timeline twin: see docs/architecture.md, "Run lifecycle and endings")."""

    SESSION_CREATED = "session_created"
    SESSION_UPDATED = "session_updated"
    ACTIVE_NODE_SWITCHED = "active_node_switched"
    NODE_CREATED = "node_created"
    AGENT_CREATED = "agent_created"
    AGENT_UPDATED = "agent_updated"
    RUN_QUEUED = "run_queued"
    RUN_STARTED = "run_started"
    RUN_STATUS_CHANGED = "run_status_changed"
    RUN_COMPLETED = "run_completed"
    RUN_FAILED = "run_failed"
    RUN_CANCELLED = "run_cancelled"
    RUN_ABORTED = "run_aborted"
    RUN_ERROR = "run_error"
    TOOL_STARTED = "tool_started"
    TOOL_COMPLETED = "tool_completed"
    TOOL_FAILED = "tool_failed"
    PERMISSION_REQUESTED = "permission_requested"
    PERMISSION_DECIDED = "permission_decided"
    ARTIFACT_CREATED = "artifact_created"
    TASK_CHANGED = "task_changed"
    MEMORY_INJECTED = "memory_injected"
    CONTEXT_COMPACTED = "context_compacted"
    CHILD_RUN_STARTED = "child_run_started"
    CHILD_RUN_FINISHED = "child_run_finished"
    HOOK_EXECUTED = "hook_executed"
    # A Stop hook denied the run its end: the loop goes on (an event, never an end reason).
    STOP_HOOK_PREVENTED = "stop_hook_prevented"


RUN_END_EVENTS: Mapping[RunStatus, EventType] = MappingProxyType(
    {
        RunStatus.COMPLETED: EventType.RUN_COMPLETED,
        RunStatus.FAILED: EventType.RUN_FAILED,
        RunStatus.CANCELLED: EventType.RUN_CANCELLED,
        RunStatus.ABORTED: EventType.RUN_ABORTED,
    }
)
"""The one timeline event a run's end writes, by the status it ends in."""

TERMINAL_RUN_EVENTS: frozenset[EventType] = frozenset(RUN_END_EVENTS.values())
"""The timeline events that end a run (one per run)."""


class ContentBlockType(StrEnum):
    """``type`` of a provider-neutral content block."""

    TEXT = "text"
    JSON = "json"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    ARTIFACT_REF = "artifact_ref"
    ATTACHMENT = "attachment"


class StopReason(StrEnum):
    """Why a model response ended, normalized across providers.

    ``MAX_TOKENS`` is every "the output limit cut the answer": OpenAI ``length``, Anthropic
    ``max_tokens`` and ``model_context_window_exceeded``, Ollama ``done_reason: length``.
    ``REFUSAL``: the model declined (OpenAI ``delta.refusal``, Anthropic ``refusal``); its
    explanation arrives as text.
    """

    END_TURN = "end_turn"
    TOOL_USE = "tool_use"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"
    ERROR = "error"
    OTHER = "other"


class InvalidToolCallReason(StrEnum):
    """Why a streamed tool call must not run (``tool_call_invalid``)."""

    INVALID_ARGUMENTS = "invalid_arguments"  # not a JSON object: the model's to fix
    TRUNCATED = "truncated"  # the output limit cut the arguments off: ask again


class PermissionPolicy(StrEnum):
    """Default permission policy of an agent for tool calls."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


class PermissionBehavior(StrEnum):
    """A decision on one permission request."""

    ALLOW = "allow"
    DENY = "deny"


class MultitaskStrategy(StrEnum):
    """What a message does when a main run of its session is active."""

    ENQUEUE = "enqueue"
    REJECT = "reject"
    INTERRUPT = "interrupt"
    BRANCH = "branch"


class HookPhase(StrEnum):
    """When a hook runs (``agent_core/hooks``; config names them in CamelCase, ``PreToolUse``)."""

    SESSION_START = "session_start"
    USER_PROMPT_SUBMIT = "user_prompt_submit"
    PRE_TOOL_USE = "pre_tool_use"
    POST_TOOL_USE = "post_tool_use"
    POST_TOOL_USE_FAILURE = "post_tool_use_failure"
    STOP = "stop"
    SUBAGENT_STOP = "subagent_stop"
    PRE_COMPACT = "pre_compact"
    RUN_END = "run_end"


class HookDecision(StrEnum):
    """What a hook decides (``HookOutput.decision``); which event takes which is in the README."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"
