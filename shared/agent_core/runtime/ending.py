"""How a run's end is put together: its :class:`RunEnd` and the node written with it.

Whoever ends a run (the loop with its answer, the driver after a cancel, a timeout or an
exception, a takeover, a cancel before the run started) builds the end here, from the path the
run stands on, so that every end leaves a path the next message can continue from
(``docs/architecture.md``, "Run lifecycle and endings"). The node written with the end, in the same
transaction (``end_run``), is:

* the answer, when the run completes with one;
* a partial answer — the text the model streamed in a turn that did not finish (a cancel, a
  provider failure, a timeout) — marked ``{"partial": true}``: what the user saw stays;
* results for tool calls the run asked for but never stored results of (it was cancelled or
  failed while they ran), each an error that says the result is unknown, marked
  ``{"interrupted": true}``: a model never sees a tool call without its result;
* none otherwise. A run cancelled before it stored anything after its message *withdraws* the
  message: the session's active node goes back to where it was, so the next message does not
  carry a request the user cancelled (the message stays in the tree, as the run's start node).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_core.errors import ErrorPayload
from agent_core.types.enums import EndReason, Role, RunStatus
from agent_core.types.protocol import (
    ContentBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from agent_core.types.runtime import Node, RunEnd, RunHandle

__all__ = ["PARTIAL", "Ending", "cancelled_reason", "ending"]

# The metadata of a partial answer node.
PARTIAL = {"partial": True}


@dataclass(frozen=True, slots=True)
class Ending:
    """A run's end as it is written: the end itself and the node written with it."""

    end: RunEnd
    node: Node | None = None  # stored with the end, in the same transaction
    text: str = ""  # the answer's text, when the run completed with one
    withdraw: bool = False  # the run's message leaves the session's active path
    # An unexpected exception that ended the run (for the debug-mode traceback artifact).
    exception: BaseException | None = None


def cancelled_reason(in_tools: bool) -> EndReason:
    """The end reason of a cancelled run: ``aborted_tools`` while tools ran, else
    ``aborted_streaming`` (while, or before, the model streamed)."""
    return EndReason.ABORTED_TOOLS if in_tools else EndReason.ABORTED_STREAMING


def ending(
    handle: RunHandle,
    path: Sequence[Node],
    status: RunStatus,
    reason: EndReason,
    *,
    turns: int = 0,
    usage: Usage | None = None,
    error: ErrorPayload | None = None,
    answer: list[ContentBlock] | None = None,
    partial_text: str = "",
    exception: BaseException | None = None,
) -> Ending:
    """The end of ``handle``'s run standing on ``path`` (see the module docstring).

    ``answer``: the blocks of a complete answer not yet stored; ``partial_text``: text streamed
    in a turn that did not finish.
    """
    tip = path[-1].node_id if path else None
    node: Node | None = None
    text = ""
    if answer is not None:
        node = Node.of_run(handle, tip, Role.ASSISTANT, answer)
        text = "".join(b.text for b in answer if isinstance(b, TextBlock))
    elif partial_text:
        node = Node.of_run(
            handle, tip, Role.ASSISTANT, [TextBlock(text=partial_text)], metadata=PARTIAL
        )
    elif calls := _unanswered_calls(path, handle.run_id):
        why = _why(status, error)
        results: list[ContentBlock] = [
            ToolResultBlock(tool_call_id=call.id, content=[TextBlock(text=why)], is_error=True)
            for call in calls
        ]
        node = Node.of_run(handle, tip, Role.TOOL, results, metadata={"interrupted": True})
    own = [n for n in path if n.run_id == handle.run_id]
    withdraw = (
        status is RunStatus.CANCELLED
        and node is None
        and all(n.role in (Role.USER, Role.SYSTEM) for n in own)
    )
    end = RunEnd(
        status=status,
        end_reason=reason,
        turns=turns,
        usage=usage or Usage(),
        error=error,
        last_node_id=node.node_id if node is not None else tip,
    )
    return Ending(end, node, text, withdraw, exception)


def _unanswered_calls(path: Sequence[Node], run_id: str) -> list[ToolCallBlock]:
    """The tool calls of the run's last node, when it is an assistant node whose results were
    never stored (a tool node always follows the calls it answers)."""
    if not path or path[-1].run_id != run_id or path[-1].role is not Role.ASSISTANT:
        return []
    return [b for b in path[-1].content if isinstance(b, ToolCallBlock)]


def _why(status: RunStatus, error: ErrorPayload | None) -> str:
    what = "was cancelled" if status is RunStatus.CANCELLED else "ended"
    if error is not None:
        what = f"failed ({error.code})"
    return (
        f"The run {what} before this tool call's result was recorded; "
        "the call may or may not have run."
    )
