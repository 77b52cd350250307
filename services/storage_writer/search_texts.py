"""What text a search row indexes, read from where it lives (``search_index`` keeps the words).

A message row's text is its node's text blocks (:func:`node_text`), read back from the session's
shard; the index keeps no copy of it. A title's is the session's metadata ``title``
(:func:`title_of`), kept beside the index since it changes. These are the one definition of
both: the appliers queue them, the flush indexes them, a deletion takes them out again and a
search's snippet shows them.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, Final

from services.storage_writer.schema import nodes_table

__all__ = ["indexed_text", "message_texts", "node_text", "node_texts", "title_of"]

# What a message contributes at most: enough to find it, bounded so that a pasted log does not
# make one write index megabytes.
_MAX_BODY_CHARS: Final = 8_000
_INDEXED_ROLES: Final = frozenset({"user", "assistant"})
# Nodes read by one statement at most (SQLite's default bound on a statement's variables is
# 32,766 since 3.32; a smaller chunk keeps the statement's text short).
_READ_CHUNK: Final = 256


def node_text(role: str, node_type: str, blocks: list[dict[str, Any]]) -> str | None:
    """The searchable text of a node: the text blocks of a user or assistant message.

    The index keeps no copy of it and takes a message's words out given this text again
    (:func:`message_texts`), so what it returns for a stored node must not change from release
    to release without a catalog migration that builds the index again."""
    if role not in _INDEXED_ROLES or node_type != "message":
        return None
    text = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()
    return text[:_MAX_BODY_CHARS] or None


def title_of(metadata: dict[str, Any] | None) -> str | None:
    """A session's title from its metadata (the console and SDK put it in ``title``)."""
    title = (metadata or {}).get("title")
    return title.strip()[:_MAX_BODY_CHARS] or None if isinstance(title, str) else None


def message_texts(shard: sqlite3.Connection, session_id: str) -> Iterator[tuple[str, str]]:
    """``(node_id, text)`` of every message of a session that the index holds a text of, in
    the session's order."""
    rows = shard.execute(
        f"SELECT node_id, role, node_type, content_json FROM {nodes_table(session_id)} "
        "WHERE role IN ('user', 'assistant') ORDER BY node_seq"
    )
    for node_id, role, node_type, content_json in rows:
        text = node_text(role, node_type, json.loads(content_json))
        if text is not None:
            yield node_id, text


def node_texts(
    shard: sqlite3.Connection, session_id: str, node_ids: Sequence[str]
) -> dict[str, str | None]:
    """The searchable text (:func:`node_text`) of each of a session's nodes ``node_ids`` that its
    shard ``shard`` holds, read by few statements (a flush reads hundreds of a session's nodes);
    a node not there, or a session whose tables are gone, has no entry."""
    wanted = list(dict.fromkeys(node_ids))
    texts: dict[str, str | None] = {}
    for start in range(0, len(wanted), _READ_CHUNK):
        chunk = wanted[start : start + _READ_CHUNK]
        try:
            rows = shard.execute(
                f"SELECT node_id, role, node_type, content_json FROM {nodes_table(session_id)} "
                f"WHERE node_id IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            return {}  # the session was deleted since its rows were read
        for node_id, role, node_type, content_json in rows:
            texts[node_id] = node_text(role, node_type, json.loads(content_json))
    return texts


def indexed_text(
    shard: sqlite3.Connection, session_id: str, node_id: str, title: str | None
) -> str | None:
    """The text the index holds for a row: the title it keeps, or its message's, read from the
    session's shard ``shard`` (``None`` if the node is not there)."""
    return title if node_id == "" else node_texts(shard, session_id, [node_id]).get(node_id)
