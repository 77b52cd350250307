"""What the task tools show the model: the task and plan templates (and the two tools that return
them), the task board, error hints.

The templates are written into the timeline as ``task_instruction`` / ``plan_instruction`` nodes
and the board as a ``task_board`` node, so all of them stay in the context: keep them
short. Tool names mentioned here must match :mod:`agent_core.tasks.tools` (a test checks it).
"""

from __future__ import annotations

from typing import ClassVar, Final

from agent_core.bus.contracts.tasks import TaskDagView, TaskListsView
from agent_core.tasks.rules import unmet_dependencies
from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.types.enums import NodeType
from agent_core.types.tasks import Task, TaskDAG, TaskStatus

__all__ = [
    "BOARD_LIMIT",
    "ERROR_HINTS",
    "PLAN_TEMPLATE",
    "TASK_TEMPLATE",
    "PlanTemplate",
    "TaskTemplate",
    "render_board",
    "render_lists",
]

TASK_TEMPLATE: Final = """\
# Working with a task list

Use a task list when the work has several steps, needs more than one agent, or must survive an
interruption. Lists are stored durably for this session; the board shows what is ready.

1. Create a list: `task_create_list` with a short name (e.g. `release-1.2`). Tie it to a plan file
   with `plan_path` if you wrote one.
2. Add tasks with `task_add`: a title that says the outcome ("Parser handles empty input"), a
   description with what "done" means, and `dependencies` = ids of tasks that must be completed
   first. Add a task only after the tasks it depends on. Aim for steps of one focused session.
3. Before working on a task, `task_claim` it. Only ready tasks (every dependency completed) can be
   claimed; a claimed task can be changed only by the agent that claimed it.
4. While working, record findings with `task_update` (`note`). Fix a wrong title or description
   the same way.
5. Finish with `task_complete` (put the result in `note`: what changed, where) or `task_fail`
   (say why, and what would unblock it). Use `task_release` to give a task back unfinished, and
   `task_cancel` for a task that is no longer needed.
6. Use `task_list` to see the board (ready, blocked, in progress) before choosing the next task.

Rules: dependencies may not form a cycle; finished tasks (completed, failed, cancelled) never
change — add a follow-up task instead. If a tool reports an error, read it: it says what to do.
"""

PLAN_TEMPLATE: Final = """\
# Writing a plan

A plan is an ordinary Markdown file written with the file tools (e.g. `write_file` to
`output/plans/<short-name>.md`); edit it as the work changes. Keep it under a page:

```markdown
# Plan: <goal in one line>

## Goal
What will be true when this is done, and for whom.

## Context
Facts that constrain the work: inputs, existing code, limits, decisions already made.

## Steps
1. <outcome> — how to verify it
2. <outcome> — depends on 1
...

## Risks and open questions
- <what could go wrong or is unknown> → <how to find out or fall back>

## Done when
- <checkable criteria>
```

Then turn the steps into a task list: `task_create_list` with `plan_path` set to the plan file,
and one `task_add` per step (its dependencies as in the plan). Update the plan file when the
plan changes; the task list tracks progress.
"""


ERROR_HINTS: Final[dict[str, str]] = {
    "task_list_not_found": "Create it with task_create_list, or call task_list to see the lists.",
    "task_list_exists": "Use the existing list (task_list shows it) or choose another name.",
    "task_not_found": "Call task_list with the list's name to see the task ids.",
    "task_dependency_not_found": "Add the dependency first, or check the ids with task_list.",
    "task_self_dependency": "Remove the task itself from its dependencies.",
    "task_duplicate_dependency": "List each dependency once.",
    "task_dependency_cycle": "Dependencies must not form a cycle; reorder the tasks.",
    "task_blocked": "Complete its dependencies first, or claim a ready task (see task_list).",
    "task_already_claimed": "Another agent holds it; pick another ready task.",
    "task_not_claimant": "Only its claimant can change it; pick another ready task.",
    "task_invalid_transition": "Check the task's status with task_list; a finished task never "
    "changes (add a follow-up task instead).",
    "task_not_pending": "Dependencies change only while a task is pending.",
    "task_wal_corrupt": "This task list is unavailable until a person repairs its file: tell the "
    "user and go on without it (other lists still work; you may start a new list).",
    "invalid_cwd": "Task lists are unavailable in this session (no usable project directory).",
    "invalid_session_id": "Task lists are unavailable in this session.",
    "bus_timeout": "The task service did not answer; the change may or may not have happened. "
    "Call task_list to check before trying again.",
}
"""What the model should do after an error, by error code (a retryable error: try again)."""

_MARK: Final = {
    TaskStatus.COMPLETED: "[x]",
    TaskStatus.IN_PROGRESS: "[~]",
    TaskStatus.FAILED: "[!]",
    TaskStatus.CANCELLED: "[-]",
    TaskStatus.PENDING: "[ ]",
}
BOARD_LIMIT: Final = 60  # tasks shown on one board; the rest are counted (boards stay in context)
_LINE = 160


def _one_line(text: str, limit: int = _LINE) -> str:
    flat = " ".join(text.split())  # a title with newlines must not break the Markdown list
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in sorted(counts.items()))


def _task_line(dag: TaskDAG, task: Task, ready: set[str], detailed: bool) -> str:
    if task.id in ready:
        state = "ready"
    elif task.status is TaskStatus.PENDING:
        state = "blocked by " + ", ".join(unmet_dependencies(dag, task))
    else:
        state = str(task.status).replace("_", " ")
        state += f" ({task.claimant})" if task.claimant else ""
    line = f"- {_MARK[task.status]} {task.id} {_one_line(task.title)} — {state}"
    if detailed and task.description:
        line += f"\n    {_one_line(task.description)}"
    if detailed and task.notes:
        line += f"\n    last note: {_one_line(task.notes[-1].text)}"
    return line


def render_board(view: TaskDagView, *, detailed: bool = False) -> str:
    """The Markdown board of one list: a head with counts, then one line per task.

    ``detailed`` adds each task's description and last note. At most :data:`BOARD_LIMIT` tasks
    are listed, in insertion order.
    """
    dag = view.dag
    counts: dict[str, int] = {}
    for task in dag.tasks.values():
        counts[str(task.status)] = counts.get(str(task.status), 0) + 1
    head = f"**Task list `{_one_line(dag.name)}`** — {len(dag.tasks)} tasks"
    if counts:
        head += f" ({_counts(counts)}; {len(view.ready)} ready, {len(view.blocked)} blocked)"
    if dag.plan is not None:
        head += f"\nPlan: {_one_line(dag.plan.path)}"
    tasks = list(dag.tasks.values())
    ready = set(view.ready)
    lines = [_task_line(dag, t, ready, detailed) for t in tasks[:BOARD_LIMIT]]
    if len(tasks) > BOARD_LIMIT:
        lines.append(f"- … and {len(tasks) - BOARD_LIMIT} more tasks")
    return "\n".join([head, *lines]) if lines else f"{head}\n(no tasks yet)"


def render_lists(view: TaskListsView) -> str:
    """The task lists of a session, one line each; an unavailable list shows its error."""
    if not view.lists:
        return "No task lists in this session yet. Create one with task_create_list."
    lines = ["Task lists of this session:"]
    for info in view.lists:
        if not info.available:
            reason = info.error.message if info.error is not None else "an empty file"
            lines.append(f"- unavailable ({info.file_name}): {_one_line(reason, 400)}")
            continue
        counts = _counts(info.status_counts)
        name = _one_line(info.name or "")
        lines.append(f"- `{name}`: {info.task_count} tasks" + (f" ({counts})" if counts else ""))
    lines.append("Call task_list with list_name for a list's board.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ template tools


class NoArgs(ToolArgs):
    """No arguments."""


class _Template(Tool[NoArgs]):
    input_model = NoArgs
    text: ClassVar[str]
    node_type: ClassVar[str]

    async def run(self, args: NoArgs, ctx: ToolContext) -> ToolOutput:
        """The template, marked with its node type."""
        return ToolOutput(self.text, metadata={"node_type": self.node_type})


class TaskTemplate(_Template):
    """``task_template``."""

    name = "task_template"
    description = (
        "How to plan work as a task list with the task tools. Call it before the first list."
    )
    text = TASK_TEMPLATE
    node_type = NodeType.TASK_INSTRUCTION.value


class PlanTemplate(_Template):
    """``plan_template``."""

    name = "plan_template"
    description = "A template for a plan: a Markdown file you write with the file tools."
    text = PLAN_TEMPLATE
    node_type = NodeType.PLAN_INSTRUCTION.value
