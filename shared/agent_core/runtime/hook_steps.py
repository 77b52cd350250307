"""The loop's two hook steps, kept out of the loop: a run's start and its wish to stop.

:func:`start` runs before the first model call of a fresh attempt (SessionStart and
UserPromptSubmit, :meth:`RunHooks.start`): a block ends the run ``failed`` with
``prompt_blocked`` and withdraws the prompt from the session's active path (the next message
must not carry what a hook refused to send); context a hook adds becomes a ``system_note`` node.
:func:`stop_denied` runs when the model answers without tool calls: when a Stop hook denies the
end, the answer is stored, the reason follows it as a ``system_note`` the model reads as the
user's turn, and the loop goes on — bounded by ``max_turns`` like any turn.
"""

from __future__ import annotations

import dataclasses

from agent_core.errors import ErrorPayload
from agent_core.runtime.ending import Ending
from agent_core.runtime.steps import StepContext
from agent_core.types.enums import EndReason, NodeType, Role, RunStatus
from agent_core.types.protocol import ContentBlock, TextBlock
from agent_core.types.runtime import Node

__all__ = ["start", "stop_denied"]


def _note(hook: str | None, event: str) -> dict[str, str]:
    return {"source": "hook", "hook": hook or "", "event": event}


async def start(ctx: StepContext, nodes: list[Node]) -> Ending | None:
    """The start hooks of a fresh attempt; the run's end when one blocked, else ``None``."""
    assert ctx.hooks is not None
    verdict = await ctx.hooks.start(nodes)
    if verdict is None:
        return None
    if verdict.blocked:
        error = ErrorPayload(
            type="hook_blocked",
            code="prompt_blocked",
            message=f"hook {verdict.hook} blocked the prompt: {verdict.reason}",
            details={"hook": verdict.hook},
        )
        end = ctx.end(RunStatus.FAILED, EndReason.FAILED, error=error)
        return dataclasses.replace(end, withdraw=True)
    for name, text in verdict.context:
        await ctx.append(
            nodes,
            Role.SYSTEM,
            [TextBlock(text=f"[hook {name}] {text}")],
            node_type=NodeType.SYSTEM_NOTE,
            metadata=_note(name, "UserPromptSubmit"),
        )
    return None


async def stop_denied(ctx: StepContext, nodes: list[Node], answer: list[ContentBlock]) -> bool:
    """Whether a Stop hook denied the run its end (then the answer and the reason are stored
    and the loop goes on)."""
    assert ctx.hooks is not None
    text = "".join(b.text for b in answer if isinstance(b, TextBlock))
    verdict = await ctx.hooks.stop(text)
    if verdict is None or not verdict.blocked:
        return False
    await ctx.append(nodes, Role.ASSISTANT, answer)
    ctx.set_partial_text("")
    note = f"[hook {verdict.hook}] Do not stop yet: {verdict.reason}"
    await ctx.append(
        nodes,
        Role.USER,
        [TextBlock(text=note)],
        node_type=NodeType.SYSTEM_NOTE,
        metadata=_note(verdict.hook, "Stop"),
    )
    return True
