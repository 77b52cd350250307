"""The storage-writer's refusal codes, declared once: what a refused command's receipt carries.

A refused command changed nothing (its savepoint rolled back); the code says why, and is the only
thing senders compare. :data:`FENCED` is the subset that means "a newer attempt owns the run":
the attempt that gets one must stop writing for that run.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from agent_core.errors import ErrorPayload

__all__ = ["FENCED", "NO_SESSION", "Refusal", "RefusalCode"]


class RefusalCode(StrEnum):
    """Why the writer refused a command (``CommandReceipt.error.code``)."""

    # sessions
    SESSION_EXISTS = "session_exists"
    SESSION_NOT_FOUND = "session_not_found"
    SESSION_ARCHIVED = "session_archived"
    RUNS_ACTIVE = "runs_active"  # a session is deleted only once its runs have ended
    # nodes (``parent_not_found`` is also a claim's ``place_error``: the claim itself stands)
    NODE_NOT_FOUND = "node_not_found"
    PARENT_NOT_FOUND = "parent_not_found"
    # agents and runs
    AGENT_NOT_FOUND = "agent_not_found"
    RUN_NOT_FOUND = "run_not_found"
    RUN_ENDED = "run_ended"
    INVALID_TRANSITION = "invalid_transition"
    EXPIRED = "expired"
    # fencing: which attempt of a run may write
    FENCE_REQUIRED = "fence_required"
    FENCE_MISMATCH = "fence_mismatch"
    STALE_ATTEMPT = "stale_attempt"
    UNCLAIMED_ATTEMPT = "unclaimed_attempt"
    # an account's named agents
    ASSISTANT_EXISTS = "assistant_exists"
    ASSISTANT_NOT_FOUND = "assistant_not_found"
    ASSISTANT_ARCHIVED = "assistant_archived"
    TOO_MANY_ASSISTANTS = "too_many_assistants"
    VERSION_MISMATCH = "version_mismatch"
    # a unique id reused by a different command
    CONFLICT = "conflict"
    # the database's disk is full: nothing was written (retryable)
    STORAGE_FULL = "storage_full"
    # ids that could not have been generated never reach SQL (agent_core.ids)
    INVALID_SESSION_ID = "invalid_session_id"
    INVALID_IDENTIFIER = "invalid_identifier"
    INVALID_ID = "invalid_id"
    # a refused receipt without its error (never sent by the writer; the client's fallback)
    COMMAND_REFUSED = "command_refused"


FENCED: Final[frozenset[RefusalCode]] = frozenset(
    {RefusalCode.STALE_ATTEMPT, RefusalCode.UNCLAIMED_ATTEMPT}
)
"""Refusals that mean: a newer attempt owns the run, so this one must stop writing for it."""

NO_SESSION: Final[frozenset[RefusalCode]] = frozenset(
    {RefusalCode.SESSION_NOT_FOUND, RefusalCode.INVALID_SESSION_ID, RefusalCode.INVALID_IDENTIFIER}
)
"""Refusals that mean: no such session (or not the sender's account's) — answered alike."""


class Refusal(ErrorPayload):
    """A refused command's error: an :class:`ErrorPayload` whose code is a :class:`RefusalCode`
    (an unknown code does not validate)."""

    code: RefusalCode  # narrower than ErrorPayload's str
