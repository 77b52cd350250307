"""The demo model of ``make demo`` (``soong-agent up --fake-provider``): a guided tour, no LLM.

A new user without a key should still see every kind of step an agent takes. The demo model is a
pure function of the request, like every scripted model here (any worker may serve any turn): it
reads the last user message of the conversation for a word and plays that word's script, one step
per model call, by counting the tool results since that message.

========== ================================================================================
word       what the run shows
========== ================================================================================
help       the list of words (also the answer to anything else without a word of its own)
files      a file written to ``output/`` and read back (an artifact to download)
code       Python run in the sandbox, writing ``output/squares.csv``
tasks      a task list with two tasks, shown as a board
worker     a worker agent dispatched with a task, and its answer used
permission a tool that asks a person first: the run waits until the call is allowed or denied
long       a long answer streamed word by word
fail       the model call fails: the run ends ``failed`` with a clear error
(other)    the ``lookup`` tool, then a short answer (what the benchmarks measure)
========== ================================================================================
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from typing import Any, Final

from pydantic import Field

from agent_core.errors import ProviderError
from agent_core.runtime.scripted import (
    DEMO_SUMMARY,
    ScriptedModel,
    ScriptedReply,
    tool_then_answer,
)
from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput
from agent_core.types.enums import Role
from agent_core.types.protocol import (
    ModelMessage,
    ModelRequest,
    ToolCall,
    ToolResultBlock,
)

__all__ = ["DEMO_WORDS", "DemoModel", "PublishTool", "demo_reply"]

_TAG: Final = "[demo model] "
_STEP_S: Final = 0.15  # a pause before each tool call's answer, so steps can be watched
_WORD_S: Final = 0.02  # between the words of the long answer

_HELP: Final = (
    _TAG + "This is soong-agent's scripted demo model: no LLM and no key, a guided tour. "
    "Send one of these words to see an agent do that kind of step:\n"
    "- files: write a file to output/ and read it back (then download it)\n"
    "- code: run Python in the sandbox, writing output/squares.csv\n"
    "- tasks: make a task list with two tasks\n"
    "- worker: dispatch a worker agent and use its answer\n"
    "- permission: call a tool that asks you first (allow or deny it)\n"
    "- long: stream a long answer word by word\n"
    "- fail: make the model call fail, to see how a run reports it\n"
    "Anything else is looked up with the lookup tool. To talk to a real model, set its key and "
    "run `make run` (docs/providers.md)."
)
_LONG: Final = (
    "A long answer arrives the way a real model writes one: a few words at a time, each "
    "shown as soon as it exists. The event stream carries every piece as a text_delta, "
    "and a client that loses its connection resumes from the last event it saw, so "
    "nothing is printed twice and nothing is lost. Meanwhile you can cancel the run: the "
    "stream then ends with the run's status and the reason it ended. "
) * 5


def _tool(name: str, **arguments: Any) -> ScriptedReply:
    call = ToolCall(id="call_" + secrets.token_hex(6), name=name, arguments=arguments)
    return ScriptedReply(tool_calls=[call], delay_s=_STEP_S)


def _say(text: str) -> ScriptedReply:
    return ScriptedReply(text=_TAG + text, chunk_chars=48)


# Each word's script: the reply for the n-th model call of the turn (n = tool results so far).
_Script = Sequence[Callable[[], ScriptedReply]]
_NOTES = "# Demo notes\n\nWritten by the demo model with write_file, read back with read_file.\n"
_SQUARES = (
    "import csv, pathlib\n"
    "rows = [(n, n * n) for n in range(1, 11)]\n"
    "with pathlib.Path('/workspace/output/squares.csv').open('w', newline='') as f:\n"
    "    csv.writer(f).writerows([('n', 'square'), *rows])\n"
    "print('sum of squares 1..10 =', sum(s for _, s in rows))\n"
)
SCRIPTS: Final[dict[str, _Script]] = {
    "files": (
        lambda: _tool("write_file", path="output/demo-notes.md", content=_NOTES),
        lambda: _tool("read_file", path="output/demo-notes.md"),
        lambda: _say(
            "I wrote output/demo-notes.md and read it back: it is an artifact of this session "
            "now (Files in the console, or GET …/files/output/demo-notes.md)."
        ),
    ),
    "code": (
        lambda: _tool("run_python", code=_SQUARES),
        lambda: _say(
            "The script ran in a sandbox of its own (no network, only this session's files) "
            "and wrote output/squares.csv; its output is in the tool result above."
        ),
    ),
    "tasks": (
        lambda: _tool("task_create_list", list_name="demo"),
        lambda: _tool("task_add", list_name="demo", title="Collect the data"),
        lambda: _tool("task_add", list_name="demo", title="Write the report"),
        lambda: _tool("task_list", list_name="demo"),
        lambda: _say(
            "I made the task list 'demo' (Tasks in the console); its tasks are kept in a "
            "write-ahead log, so they survive a restart."
        ),
    ),
    "worker": (
        lambda: _tool(
            "dispatch_worker", worker="researcher", task="Look up what the user asked about."
        ),
        lambda: _say(
            "A worker agent (researcher) ran as a child run with a context of its own and "
            "answered; its steps are in the session's tree and under Agents."
        ),
    ),
    "permission": (
        lambda: _tool("publish_report", path="output/demo-notes.md"),
        lambda: _say(
            "That call waited for a person: publish_report asks first. Whatever you decided "
            "is in the tool result above (a denial tells the model why)."
        ),
    ),
    "long": (
        lambda: ScriptedReply(
            text=_TAG + _LONG,
            pieces=tuple(re.findall(r"\S+\s*", _TAG + _LONG)),  # a word per delta
            delay_s=_WORD_S,
        ),
    ),
}
DEMO_WORDS: Final = ("help", *SCRIPTS, "fail")
_WORD: Final = re.compile(r"\b(" + "|".join(DEMO_WORDS) + r")\b", re.I)
# Anything else: the lookup tool, then the ~1 KB answer (the benchmarks' workload).
_DEFAULT: Final = tool_then_answer()


def _since_user(messages: Sequence[ModelMessage]) -> tuple[str, int]:
    """The last user message's text, and how many tool results came after it."""
    results = 0
    for message in reversed(messages):
        if message.role is Role.TOOL or any(
            isinstance(b, ToolResultBlock) for b in message.content
        ):
            results += 1
            continue
        if message.role is Role.USER:
            return " ".join(getattr(b, "text", "") for b in message.content), results
    return "", results


def demo_reply(request: ModelRequest) -> ScriptedReply:
    """The demo's next reply to ``request`` (see the module docstring)."""
    if request.metadata.get("purpose") == "compact":  # the summarizer of a compaction
        return ScriptedReply(text=DEMO_SUMMARY)
    text, step = _since_user(request.messages)
    match = _WORD.search(text)
    if match is None:
        return _DEFAULT(request)
    word = match.group(1).lower()
    if word == "help":
        return ScriptedReply(text=_HELP, chunk_chars=64)
    if word == "fail":
        raise ProviderError(
            "demo_failure",
            "the demo model was asked to fail ('fail'): this is how a failed model call ends a run",
            provider="fake",
        )
    script = SCRIPTS[word]
    return script[min(step, len(script) - 1)]()


class DemoModel(ScriptedModel):
    """The demo's provider adapter (registered as ``fake`` by a run-worker in demo mode)."""

    def __init__(self) -> None:
        super().__init__(demo_reply)


class PublishArgs(ToolArgs):
    """Arguments of ``publish_report``."""

    path: str = Field(max_length=500, description="The file of output/ to publish")


class PublishTool(Tool[PublishArgs]):
    """``publish_report``: the demo's tool that asks a person first (nothing leaves the machine)."""

    name = "publish_report"
    description = (
        "Publish a report from output/ (demo tool: asks first; nothing leaves the machine)."
    )
    input_model = PublishArgs
    asks_first = True

    async def run(self, args: PublishArgs, ctx: ToolContext) -> ToolOutput:
        """Say what would have been published."""
        return ToolOutput(f"published {args.path} (demo: nothing left the machine)")
