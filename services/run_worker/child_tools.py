"""The tools that start child runs (``dispatch_worker``, ``fork_agent``), what they answer
(:func:`child_result`) and orchestrator mode's prompt; what they do is a :class:`Children`'s
(the worker's :class:`services.run_worker.children.ChildRunner`, which imports this module)."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import Field

from agent_core.errors import ToolError
from agent_core.runtime import Ending
from agent_core.tools import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.types.enums import NodeType, RunStatus
from agent_core.types.runtime import AgentConfig, RunHandle

__all__ = [
    "DISPATCH_TOOL",
    "FORK_TOOL",
    "ORCHESTRATOR_PROMPT",
    "DispatchArgs",
    "DispatchWorker",
    "ForkAgent",
    "ForkArgs",
    "child_result",
    "Children",
    "child_tools",
    "orchestrator_config",
]

DISPATCH_TOOL = "dispatch_worker"
FORK_TOOL = "fork_agent"


class Children(Protocol):
    """What the child tools need of the run-worker's child runner (a protocol, so that this
    module depends on no runner and the runner may import the argument models below)."""

    async def dispatch(self, args: DispatchArgs, ctx: ToolContext) -> ToolOutput: ...

    async def fork(self, args: ForkArgs, ctx: ToolContext) -> ToolOutput: ...


class DispatchArgs(ToolArgs):
    """What the model gives ``dispatch_worker``."""

    worker: str = Field(
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="The worker's name. Dispatching to the same name again continues that "
        "worker's context (it remembers its earlier tasks and answers).",
    )
    task: str = Field(
        min_length=1,
        max_length=100_000,
        description="The task, with everything the worker needs: it does not see this "
        "conversation.",
    )
    new_branch: bool = Field(
        default=False,
        description="Start the worker on a fresh branch of its context instead of after its "
        "last answer.",
    )
    assistant: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="Run the worker as this named agent (assistant) of the account: its "
        "instructions, model, tools and limits instead of yours.",
    )


class DispatchWorker(Tool[DispatchArgs]):
    """``dispatch_worker``: run a task on a worker sub-agent and return its final answer."""

    name = DISPATCH_TOOL
    description = (
        "Hand a self-contained task to a worker sub-agent and wait for its final answer. The "
        "worker has the same tools as you except this one and fork_agent. Tasks dispatched in "
        "the same turn run concurrently."
    )
    input_model = DispatchArgs
    # A child run is bounded by its own budgets (turns, tokens, wall clock); this only caps a
    # dispatch whose config sets none.
    timeout_s = 3600.0

    def __init__(self, children: Children | None = None) -> None:
        self._children = children

    async def run(self, args: DispatchArgs, ctx: ToolContext) -> ToolOutput:
        if self._children is None:
            raise ToolError("dispatch_unavailable", "worker sub-agents are not available here")
        return await self._children.dispatch(args, ctx)


class ForkArgs(ToolArgs):
    """What the model gives ``fork_agent``."""

    task: str = Field(
        min_length=1,
        max_length=100_000,
        description="What the fork should do; it knows this conversation up to now.",
    )


class ForkAgent(Tool[ForkArgs]):
    """``fork_agent``: run a task on a copy of the agent that knows the conversation so far."""

    name = FORK_TOOL
    description = (
        "Hand a task to a fork of yourself: it knows this conversation up to now (not this "
        "turn), works on its own branch with the same tools as you except this one and "
        "dispatch_worker, and returns its final answer — so its exploring stays out of your "
        "context. Forks started in the same turn run concurrently."
    )
    input_model = ForkArgs
    timeout_s = DispatchWorker.timeout_s

    def __init__(self, children: Children | None = None) -> None:
        self._children = children

    async def run(self, args: ForkArgs, ctx: ToolContext) -> ToolOutput:
        if self._children is None:
            raise ToolError("fork_unavailable", "forks are not available here")
        return await self._children.fork(args, ctx)


ORCHESTRATOR_PROMPT = (
    "You are the orchestrator of this session: you do not do the work yourself. Break the "
    "request into self-contained tasks and hand each to a worker with dispatch_worker (tasks "
    "dispatched in the same turn run concurrently; a worker you name again remembers its earlier "
    "tasks). Keep track of the work with the task tools, check what the workers return, dispatch "
    "again where something is missing, and answer the user with the combined result."
)


def orchestrator_config(config: AgentConfig) -> AgentConfig:
    """An orchestrator's config: the session's, with the orchestration prompt first (its
    workers keep the session's prompt)."""
    prompt = "\n\n".join(p for p in (ORCHESTRATOR_PROMPT, config.system_prompt) if p)
    return config.model_copy(update={"system_prompt": prompt})


def child_tools(children: Children | None) -> list[Tool[Any]]:
    """The tools that start child runs, bound to ``children`` (``None``: for definitions)."""
    return [DispatchWorker(children), ForkAgent(children)]


def child_result(child: RunHandle, ending: Ending) -> ToolOutput:
    """The worker's answer for the parent's model; the tool node becomes a ``child_result``."""
    metadata = {
        "node_type": NodeType.CHILD_RESULT.value,
        "child_run_id": child.run_id,
        "agent_id": child.agent_id,
    }
    end = ending.end
    if end.status is RunStatus.COMPLETED:
        return ToolOutput(ending.text or "(the child agent gave no answer)", metadata=metadata)
    why = end.error.message if end.error else end.end_reason.value
    metadata["error_code"] = end.error.code if end.error else end.status.value
    return ToolOutput(
        f"The child agent's run ended {end.status.value}: {why}",
        is_error=True,
        metadata=metadata,
    )
