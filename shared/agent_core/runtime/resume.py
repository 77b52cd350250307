"""Where a run taken over after a crash may continue — never re-running a stored tool call.

The loop makes the assistant node (with its tool calls) durable before any tool runs, and the tool
node before the next model call. So the last stored node of the run says what is safe:

* no node of the run yet, or a ``system`` node (injected memory): start the run over;
* a ``tool`` node: every call of the last turn has its result; continue with a model call;
* an ``assistant`` node without tool calls: the answer is stored; the run is complete;
* an ``assistant`` node with tool calls: the calls may have run but their results are not
  stored. When every one of them is a tool declared ``repeatable`` (read-only or idempotent),
  running them again is safe: the run resumes there (``rerun``). Otherwise a call may have left
  half-done side effects, and running it again could repeat them, so the run ends ``failed``
  with ``worker_lost``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from agent_core.types.enums import Role
from agent_core.types.protocol import TextBlock, ToolCallBlock
from agent_core.types.runtime import Node

__all__ = ["ResumePoint", "resume_point"]


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """What to do with a run found in flight: ``continue``, ``rerun`` (its last turn's tool
    calls, then on), ``complete`` or ``unsafe``."""

    action: Literal["continue", "rerun", "complete", "unsafe"]
    turns_done: int
    final_text: str = ""


def resume_point(
    path: Sequence[Node], run_id: str, repeatable: Callable[[str], bool] | None = None
) -> ResumePoint:
    """Decide from the active path that ends at the run's last stored node; ``repeatable``
    says whether a tool (by name) may run again."""
    own = [n for n in path if n.run_id == run_id]
    turns = sum(1 for n in own if n.role is Role.ASSISTANT)
    last = next((n for n in reversed(own) if n.role is not Role.SYSTEM), None)
    if last is None or last.role in (Role.TOOL, Role.USER):
        return ResumePoint("continue", turns)
    calls = [b.name for b in last.content if isinstance(b, ToolCallBlock)]
    if calls:
        safe = repeatable is not None and all(repeatable(name) for name in calls)
        return ResumePoint("rerun" if safe else "unsafe", turns)
    text = "".join(b.text for b in last.content if isinstance(b, TextBlock))
    return ResumePoint("complete", turns, text)
