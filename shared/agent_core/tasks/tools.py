"""Task tools for agents: task lists through the task-wal service, and the task/plan templates.

``task_tools(client, scope=...)`` returns fresh tools bound to one session's task scope (account and
logical project; ``None`` when the session's project is not usable: the tools then say so). The
run-worker builds them per run). Each change tool sends one command as ``ctx.agent_id`` in
``ctx.session_id``, with a request id (and, for ``task_add``, a task id) derived from
``ctx.tool_call_id``: a resumed run that repeats a call is answered with the first outcome instead
of applying it twice. Refusals (a rule, a corrupt list, no answer) become ``is_error`` outputs that
say what went wrong and what to do; a tool never raises for them. No task tool has ``writes``
set: they change task-wal's state, never workspace files (so no ``output/`` scan, no file prompt).
The template tools and every text the model reads live in :mod:`agent_core.tasks.templates`.

Metadata conventions read by the run loop (the executor merges ``ToolOutput.metadata`` into the
``ToolResult``):

- ``metadata["task_board"]``: a Markdown summary of the list after the change, set on every
  successful change (also on a repeated call, whose first outcome may never have been recorded).
  The loop appends a ``task_board`` node after the tool node. A command whose effect already
  held (nothing written) and ``task_list`` set neither key.
- ``metadata["task_event"] = {"list": name, "change": kind, "task_id": id or None}``: the runtime
  event of the change; ``kind`` is a :class:`~agent_core.types.tasks.TaskChangeKind` value.
- ``metadata["node_type"]``: ``"task_instruction"`` (``task_template``) or ``"plan_instruction"``
  (``plan_template``): the tool node is written with that node type.
- ``metadata["error_code"]`` on errors: the service's error code (e.g. ``task_blocked``).
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from typing import Annotated, Any, ClassVar, Self, TypeVar

from pydantic import Field, ValidationError, model_validator

from agent_core.bus.contracts.tasks import TaskChangeResult, TaskScope
from agent_core.errors import AgentCoreError, redact
from agent_core.ids import IdPrefix
from agent_core.tasks.client import TaskClient
from agent_core.tasks.dag import to_change
from agent_core.tasks.templates import (
    ERROR_HINTS,
    PlanTemplate,
    TaskTemplate,
    render_board,
    render_lists,
)
from agent_core.tools.base import ArgsT, Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.types.task_commands import (
    AddTask,
    CancelTask,
    ClaimTask,
    CompleteTask,
    CreateList,
    FailTask,
    ReleaseTask,
    TaskCommand,
    UpdateTask,
)
from agent_core.types.tasks import ListName, NoteText, PlanRef, TaskId, Text, Title

__all__ = [
    "TaskAdd",
    "TaskCancel",
    "TaskClaim",
    "TaskComplete",
    "TaskCreateList",
    "TaskFail",
    "TaskList",
    "TaskRelease",
    "TaskUpdate",
    "derived_id",
    "task_tools",
]

_LIST = Field(description="Name of the task list (as given to task_create_list).")
_TASK = Field(description="Id of the task (task_…), as shown on the board.")
ListArg = Annotated[ListName, _LIST]
TaskArg = Annotated[TaskId, _TASK]


def derived_id(prefix: IdPrefix, *parts: str) -> str:
    """A deterministic id from ``parts``: the same tool call (a resumed run's retry) gets the same id."""
    seed = "\x00".join(parts)
    return f"{prefix}_{hashlib.sha256(seed.encode()).hexdigest()[:24]}"


# ------------------------------------------------------------------------------ arguments


class CreateListArgs(ToolArgs):
    """Arguments of ``task_create_list``."""

    list_name: Annotated[ListName, Field(description="Short name of the new task list.")]
    plan_path: Annotated[
        str | None,
        Field(min_length=1, max_length=1_000, description="Plan Markdown file this list follows."),
    ] = None


class AddArgs(ToolArgs):
    """Arguments of ``task_add``."""

    list_name: ListArg
    title: Annotated[Title, Field(description="The outcome, in a few words.")]
    description: Annotated[Text, Field(description="What done means; context.")] = ""
    dependencies: Annotated[
        list[TaskId],
        Field(max_length=100, description="Ids of tasks that must be completed first."),
    ] = []


class ListArgs(ToolArgs):
    """Arguments of ``task_list``."""

    list_name: Annotated[
        ListName | None, Field(description="A list's name for its board; omit for all lists.")
    ] = None


class UpdateArgs(ToolArgs):
    """Arguments of ``task_update`` (at least one of title, description, note)."""

    list_name: ListArg
    task_id: TaskArg
    title: Title | None = None
    description: Text | None = None
    note: Annotated[NoteText | None, Field(description="A note to append.")] = None

    @model_validator(mode="after")
    def _changes_something(self) -> Self:
        if self.title is None and self.description is None and self.note is None:
            raise ValueError("set at least one of title, description or note")
        return self


class TransitionArgs(ToolArgs):
    """Arguments of ``task_claim`` / ``task_complete`` / ``task_release`` / ``task_cancel``."""

    list_name: ListArg
    task_id: TaskArg
    note: Annotated[NoteText | None, Field(description="Optional note (a result).")] = None


class FailArgs(TransitionArgs):
    """Arguments of ``task_fail``: the reason is required."""

    note: Annotated[NoteText, Field(description="Why it failed; what would unblock it.")]


TA = TypeVar("TA", bound=TransitionArgs)


# ------------------------------------------------------------------------------ tools


class _TaskTool(Tool[ArgsT]):
    timeout_s: ClassVar[float] = 60.0  # the client retries a lost reply before giving up
    # Reads, or commands whose request id derives from the tool call id: a repeated call gets
    # the first outcome back instead of applying the change twice.
    repeatable: ClassVar[bool] = True

    def __init__(self, client: TaskClient, scope: TaskScope | None) -> None:
        self.client = client
        self.scope = scope


class _ChangeTool(_TaskTool[ArgsT]):
    """A tool that sends one command and reports the change with the board."""

    done: ClassVar[str]  # past-tense verb for the summary line

    @abstractmethod
    def command(self, args: ArgsT, ctx: ToolContext) -> TaskCommand:
        """The command this call sends."""

    async def run(self, args: ArgsT, ctx: ToolContext) -> ToolOutput:
        """Send the command; report what changed and the board, or the refusal."""
        try:
            command = self.command(args, ctx)
        except ValidationError as exc:  # a session or agent id the domain refuses: not the model's
            fields = ", ".join(str(e["loc"][0]) for e in exc.errors() if e["loc"])
            return _failure(
                "invalid_context",
                f"Task lists are unavailable in this run (invalid {fields or 'context'}); "
                "go on without them.",
            )
        if self.scope is None:
            return _no_scope()
        request_id = derived_id("cmd", ctx.session_id, ctx.tool_call_id, self.name)
        try:
            result = await self.client.execute(
                command, scope=self.scope, request_id=request_id, include_dag=True
            )
        except AgentCoreError as exc:
            return _error_output(exc)
        return self._report(command, result)

    def _report(self, command: TaskCommand, result: TaskChangeResult) -> ToolOutput:
        task_id: str | None = getattr(command, "task_id", None)
        subject = f"task list {result.list_name!r}"
        if result.task is not None:
            subject = f"task {result.task.id} ({result.task.title!r}) in list {result.list_name!r}"
        if result.duplicate:
            line = f"{self.done} {subject} (this call was already applied; not applied twice)."
        elif result.changed:
            line = f"{self.done} {subject}."
        else:
            line = f"Nothing to change: that already holds for {subject}."
        if result.dag is None:  # include_dag was asked for; a reply without it is still a success
            return ToolOutput(line)
        text = render_board(result.dag)
        meta: dict[str, Any] = {}
        if result.changed or result.duplicate:
            kind = to_change(command).kind
            meta["task_board"] = text
            meta["task_event"] = {"list": result.list_name, "change": str(kind), "task_id": task_id}
        return ToolOutput(f"{line}\n\n{text}", metadata=meta)


class TaskCreateList(_ChangeTool[CreateListArgs]):
    """``task_create_list``: a new named list in this session."""

    name = "task_create_list"
    description = "Create a named task list for this session, optionally tied to a plan file."
    input_model = CreateListArgs
    done = "Created"

    def command(self, args: CreateListArgs, ctx: ToolContext) -> TaskCommand:
        """A ``CreateList``; a plan file's id is derived from its path (stable per session)."""
        plan = None
        if args.plan_path is not None:
            plan_id = derived_id("plan", ctx.session_id, args.plan_path)
            plan = PlanRef(plan_id=plan_id, path=args.plan_path)
        return CreateList(
            session_id=ctx.session_id, list_name=args.list_name, agent_id=ctx.agent_id, plan=plan
        )


class TaskAdd(_ChangeTool[AddArgs]):
    """``task_add``: a pending task, after the tasks it depends on."""

    name = "task_add"
    description = (
        "Add a task to a task list. Dependencies are ids of existing tasks that must be "
        "completed before this one can be claimed."
    )
    input_model = AddArgs
    done = "Added"

    def command(self, args: AddArgs, ctx: ToolContext) -> TaskCommand:
        """An ``AddTask`` whose task id is derived from the tool call id."""
        return AddTask(
            session_id=ctx.session_id,
            list_name=args.list_name,
            agent_id=ctx.agent_id,
            task_id=derived_id("task", ctx.session_id, ctx.tool_call_id, "task"),
            title=args.title,
            description=args.description,
            dependencies=tuple(args.dependencies),
        )


class TaskUpdate(_ChangeTool[UpdateArgs]):
    """``task_update``: title, description, or a note."""

    name = "task_update"
    description = (
        "Change a task's title or description, or append a note. A claimed task can be "
        "changed only by its claimant; finished tasks never change."
    )
    input_model = UpdateArgs
    done = "Updated"

    def command(self, args: UpdateArgs, ctx: ToolContext) -> TaskCommand:
        """An ``UpdateTask``."""
        return UpdateTask(
            session_id=ctx.session_id,
            list_name=args.list_name,
            agent_id=ctx.agent_id,
            task_id=args.task_id,
            title=args.title,
            description=args.description,
            note=args.note,
        )


class _Transition(_ChangeTool[TA]):
    kind: ClassVar[type[ClaimTask | ReleaseTask | CompleteTask | FailTask | CancelTask]]

    def command(self, args: TA, ctx: ToolContext) -> TaskCommand:
        """The transition command of this tool."""
        return self.kind(
            session_id=ctx.session_id,
            list_name=args.list_name,
            agent_id=ctx.agent_id,
            task_id=args.task_id,
            note=args.note,
        )


class TaskClaim(_Transition[TransitionArgs]):
    """``task_claim``."""

    name = "task_claim"
    description = "Claim a ready task before working on it; then only you can change it."
    input_model = TransitionArgs
    kind = ClaimTask
    done = "Claimed"


class TaskComplete(_Transition[TransitionArgs]):
    """``task_complete``."""

    name = "task_complete"
    description = "Mark a task you claimed as completed; put the result in the note."
    input_model = TransitionArgs
    kind = CompleteTask
    done = "Completed"


class TaskFail(_Transition[FailArgs]):
    """``task_fail``."""

    name = "task_fail"
    description = "Mark a task you claimed as failed, with the reason."
    input_model = FailArgs
    kind = FailTask
    done = "Failed"


class TaskRelease(_Transition[TransitionArgs]):
    """``task_release``."""

    name = "task_release"
    description = "Give back a task you claimed but will not finish (it becomes pending again)."
    input_model = TransitionArgs
    kind = ReleaseTask
    done = "Released"


class TaskCancel(_Transition[TransitionArgs]):
    """``task_cancel``."""

    name = "task_cancel"
    description = "Cancel a task that is no longer needed (a claimed one only by its claimant)."
    input_model = TransitionArgs
    kind = CancelTask
    done = "Cancelled"


class TaskList(_TaskTool[ListArgs]):
    """``task_list``: one list's board, or every list of the session."""

    name = "task_list"
    description = (
        "Show a task list's board (ready, blocked, in progress, finished tasks with notes), or "
        "all task lists of this session when list_name is omitted."
    )
    input_model = ListArgs

    async def run(self, args: ListArgs, ctx: ToolContext) -> ToolOutput:
        """Query the service; an unavailable list is reported, not raised."""
        if self.scope is None:
            return _no_scope()
        try:
            if args.list_name is None:
                lists = await self.client.list_dags(ctx.session_id, self.scope)
                return ToolOutput(render_lists(lists))
            view = await self.client.get_dag(ctx.session_id, self.scope, args.list_name)
        except AgentCoreError as exc:
            return _error_output(exc)
        return ToolOutput(render_board(view, detailed=True))


def _no_scope() -> ToolOutput:
    return _failure(
        "invalid_cwd",
        "Task lists are unavailable in this run (the session's project is not usable); "
        "go on without them.",
    )


def task_tools(client: TaskClient, *, scope: TaskScope | None) -> list[Tool[Any]]:
    """Fresh task tools bound to the session's task ``scope`` (module docstring)."""
    changes: list[Tool[Any]] = [
        cls(client, scope)
        for cls in (
            TaskCreateList,
            TaskAdd,
            TaskUpdate,
            TaskClaim,
            TaskComplete,
            TaskFail,
            TaskRelease,
            TaskCancel,
        )
    ]
    return [*changes, TaskList(client, scope), TaskTemplate(), PlanTemplate()]


def _failure(code: str, message: str) -> ToolOutput:
    return ToolOutput(redact(message), is_error=True, metadata={"error_code": code})


def _error_output(exc: AgentCoreError) -> ToolOutput:
    """A refusal as the model should read it: what went wrong, then what to do."""
    hint = ERROR_HINTS.get(exc.code) or ("Try again." if exc.retryable else "")
    return _failure(exc.code, f"Task tool error ({exc.code}): {exc.message}\n{hint}".rstrip())
