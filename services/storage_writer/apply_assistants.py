"""How the named agents' (assistants') commands change their account's shard.

Called inside the writer's savepoint per command, like every applier (:mod:`commands`
dispatches here): a refusal is a :class:`StorageError` with a stable code and rolls the command
back. Each command stores its result in ``command_receipts`` (``commands.needs_receipt``), so a
repeat of the same ``command_id`` gets that result back and changes nothing. Every statement is
scoped by the command's ``account_id``: another account's assistant is ``assistant_not_found``,
exactly like a missing one.
"""

from __future__ import annotations

import json
import sqlite3

from agent_core.bus.contracts.assistants import (
    MAX_ACTIVE_ASSISTANTS,
    ArchiveAssistant,
    ArchiveAssistantResult,
    CreateAssistant,
    CreateAssistantResult,
    UpdateAssistant,
    UpdateAssistantResult,
)
from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.types.api import AssistantDefinition
from services.storage_writer.apply_common import ApplyContext, refusal

__all__ = ["archive_assistant", "create_assistant", "update_assistant"]

_ACTIVE = "active"
_ARCHIVED = "archived"


def _definition_json(definition: AssistantDefinition) -> str:
    return json.dumps(definition.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False)


def create_assistant(
    conn: sqlite3.Connection, c: CreateAssistant, ctx: ApplyContext
) -> CreateAssistantResult:
    """Version 1 of a new assistant; ``assistant_exists`` when the name is taken (active),
    ``too_many_assistants`` past :data:`MAX_ACTIVE_ASSISTANTS`."""
    (active,) = conn.execute(
        "SELECT count(*) FROM assistants WHERE account_id = ? AND status = ?",
        (c.account_id, _ACTIVE),
    ).fetchone()
    if active >= MAX_ACTIVE_ASSISTANTS:  # a listing answers them all at once: keep it bounded
        raise refusal(
            RefusalCode.TOO_MANY_ASSISTANTS,
            f"an account has at most {MAX_ACTIVE_ASSISTANTS} active assistants; archive some",
            limit=MAX_ACTIVE_ASSISTANTS,
        )
    taken = conn.execute(
        "SELECT assistant_id FROM assistants WHERE account_id = ? AND name = ? AND status = ?",
        (c.account_id, c.name, _ACTIVE),
    ).fetchone()
    if taken is not None:
        raise refusal(
            RefusalCode.ASSISTANT_EXISTS, f"an assistant named {c.name!r} exists", name=c.name
        )
    conn.execute(
        "INSERT INTO assistants (assistant_id, account_id, name, version, status, created_at, "
        "updated_at) VALUES (?, ?, ?, 1, ?, ?, ?)",
        (c.assistant_id, c.account_id, c.name, _ACTIVE, ctx.now, ctx.now),
    )
    conn.execute(
        "INSERT INTO assistant_versions (assistant_id, version, definition_json, created_at) "
        "VALUES (?, 1, ?, ?)",
        (c.assistant_id, _definition_json(c.definition), ctx.now),
    )
    return CreateAssistantResult(assistant_id=c.assistant_id, version=1, created_at=ctx.now)


def _current(conn: sqlite3.Connection, account_id: str, assistant_id: str) -> tuple[int, str]:
    row = conn.execute(
        "SELECT version, status FROM assistants WHERE assistant_id = ? AND account_id = ?",
        (assistant_id, account_id),
    ).fetchone()
    if row is None:
        raise refusal(
            RefusalCode.ASSISTANT_NOT_FOUND, "no such assistant", assistant_id=assistant_id
        )
    return int(row[0]), str(row[1])


def update_assistant(
    conn: sqlite3.Connection, c: UpdateAssistant, ctx: ApplyContext
) -> UpdateAssistantResult:
    """The next version; the versions before it are kept as they were."""
    version, status = _current(conn, c.account_id, c.assistant_id)
    if status != _ACTIVE:
        raise refusal(
            RefusalCode.ASSISTANT_ARCHIVED, "the assistant is archived", assistant_id=c.assistant_id
        )
    if c.expected_version is not None and c.expected_version != version:
        raise refusal(
            RefusalCode.VERSION_MISMATCH,
            f"the assistant is at version {version}, not {c.expected_version}",
            assistant_id=c.assistant_id,
            current_version=version,
        )
    new = version + 1
    conn.execute(
        "INSERT INTO assistant_versions (assistant_id, version, definition_json, created_at) "
        "VALUES (?, ?, ?, ?)",
        (c.assistant_id, new, _definition_json(c.definition), ctx.now),
    )
    conn.execute(
        "UPDATE assistants SET version = ?, updated_at = ? WHERE assistant_id = ?",
        (new, ctx.now, c.assistant_id),
    )
    return UpdateAssistantResult(assistant_id=c.assistant_id, version=new, updated_at=ctx.now)


def archive_assistant(
    conn: sqlite3.Connection, c: ArchiveAssistant, ctx: ApplyContext
) -> ArchiveAssistantResult:
    """Mark it archived (its name is free again); an archived one stays as it is."""
    _, status = _current(conn, c.account_id, c.assistant_id)
    if status != _ARCHIVED:
        conn.execute(
            "UPDATE assistants SET status = ?, updated_at = ? WHERE assistant_id = ?",
            (_ARCHIVED, ctx.now, c.assistant_id),
        )
    return ArchiveAssistantResult(assistant_id=c.assistant_id, status="archived")
