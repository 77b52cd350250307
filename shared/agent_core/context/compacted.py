"""What a ``compaction`` node on the active path means for the context (non-destructive).

A compaction node is appended to the tree like any node, so it lies on the path of everything
after it and on no path before it: ``switch_node`` to an older node builds that point's full
context, as if no compaction had happened. Its content is the summary; its metadata says what it
stands for:

* ``covers_through``: the id of the last node of the path it covers (from the root, or from the
  previous compaction's coverage — a later summary includes the earlier one);
* ``pinned``: ids of covered user / instruction nodes kept verbatim (the user's words, a plan or
  task instruction) — never summarized away;
* ``method``: ``summary`` (a model wrote it) or ``trim`` (the summarizer failed; the covered
  nodes were dropped and the content says so); ``covered``: how many nodes it covers.

Covered ``system`` nodes (memory, loaded skills, task boards, system notes) are pinned by nature
and stay where they were. The covered nodes themselves stay in SQLite, readable through the API.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_core.types.enums import NodeType, Role
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import Node

__all__ = ["Compacted", "compacted_view", "summary_message"]


@dataclass(slots=True)
class Compacted:
    """The active path as the newest compaction node on it presents it."""

    node: Node
    text: str  # the first message of the context: summary plus the user's pinned words
    instructions: list[Node] = field(default_factory=list)  # pinned tool-result instructions
    nodes: list[Node] = field(default_factory=list)  # the rest of the context, in path order
    dropped: list[str] = field(default_factory=list)  # covered node ids left out


def summary_message(summary: str, covered: int, users: Sequence[str]) -> str:
    """The text that opens a compacted context."""
    head = (
        f"[Summary of the earlier conversation: {covered} messages are summarized here. "
        "They are kept in the session's history.]\n"
    )
    text = head + summary.strip()
    if users:
        quoted = "\n".join("> " + u.replace("\n", "\n> ") for u in users)
        text += "\n\n[The user's own words from that part, kept verbatim:]\n" + quoted
    return text


def compacted_view(path: Sequence[Node]) -> Compacted | None:
    """The view of ``path`` through its newest compaction node; ``None`` when it has none (or
    the node's ``covers_through`` is not on the path, which a well-formed tree never has)."""
    at = next(
        (i for i in range(len(path) - 1, -1, -1) if path[i].node_type is NodeType.COMPACTION),
        None,
    )
    if at is None:
        return None
    node = path[at]
    through = node.metadata.get("covers_through")
    end = next((i for i in range(at - 1, -1, -1) if path[i].node_id == through), None)
    if end is None:
        return None
    pinned = node.metadata.get("pinned") or []
    pinned_ids = set(pinned) if isinstance(pinned, list) else set()
    summary = "\n".join(b.text for b in node.content if isinstance(b, TextBlock))
    users: list[str] = []
    view = Compacted(node=node, text="")
    for covered in path[: end + 1]:
        if covered.node_type is NodeType.COMPACTION:
            view.dropped.append(covered.node_id)
        elif covered.role is Role.SYSTEM:
            view.nodes.append(covered)
        elif covered.node_id in pinned_ids and covered.role is Role.USER:
            users.append("\n".join(b.text for b in covered.content if isinstance(b, TextBlock)))
        elif covered.node_id in pinned_ids:
            view.instructions.append(covered)
        else:
            view.dropped.append(covered.node_id)
    leading = True  # a tool result whose call was covered cannot open the kept messages
    for kept in path[end + 1 :]:
        if kept.node_type is NodeType.COMPACTION:
            continue
        if leading and kept.role is Role.TOOL:
            view.dropped.append(kept.node_id)
            continue
        if kept.role is not Role.SYSTEM:
            leading = False
        view.nodes.append(kept)
    covered_count = node.metadata.get("covered")
    view.text = summary_message(
        summary, covered_count if isinstance(covered_count, int) else end + 1, users
    )
    return view
