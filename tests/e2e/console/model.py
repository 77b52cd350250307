"""The console tests' model: the OpenAI fake server answering by what the last user message asks.

- ``write …``: a sentence, then ``write_file`` to ``output/report.csv``; after the tool, an answer.
- ``ask …``: ``PART_ONE`` (thirty numbered words streamed 0.05 s apart), then ``write_file`` to
  ``output/approved.txt`` (the session asks before ``write_file``, so the run waits for a person);
  after the tool, ``PART_TWO`` streamed in pieces.
- ``slow …``: sixty numbered words streamed 0.1 s apart (``SLOW_TEXT``), to cancel in the middle.
- ``fail …``: the provider answers 400, so the run fails with the provider's error code.
- ``plan …``: ``task_create_list`` then two ``task_add``, then an answer.
- anything else: ``Echo: <message>``.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from tests.fakes.script import ScriptedResponse, ScriptedStatus, ScriptedTurn
from tests.integration.run_worker.harness import last_role, text_answer

REPORT_CSV = "name,score\nada,3\nbob,5\n"
SLOW_WORDS = [f"w{i:02d}" for i in range(1, 61)]
SLOW_TEXT = " ".join(SLOW_WORDS)
PART_ONE = " ".join(f"a{i:02d}" for i in range(1, 31))
PART_TWO = "Part two: the file is written and approved."


def _tool_turn(
    text: str, *calls: tuple[str, str, dict[str, Any]], pace_s: float = 0.0
) -> ScriptedTurn:
    """``text`` (word by word ``pace_s`` apart when given), then the calls; each call id gets a
    random tail, as a provider's would (a permission decision is kept under the request's id,
    which the call id makes)."""
    words = text.split(" ") if pace_s else [text]
    steps: list[Any] = []
    for i, word in enumerate(w for w in words if w):
        if pace_s:
            steps.append({"type": "delay", "seconds": pace_s})
        steps.append({"type": "text", "text": word if i == 0 or not pace_s else f" {word}"})
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = json.dumps(arguments)
        call_id = f"{call_id}_{secrets.token_hex(4)}"
        steps += [
            {"type": "tool_call_start", "index": index, "id": call_id, "name": name},
            {"type": "tool_call_args", "index": index, "fragment": raw},
            {"type": "tool_call_end", "index": index},
        ]
    steps += [{"type": "usage", "input_tokens": 11, "output_tokens": 5}]
    steps += [{"type": "finish", "reason": "tool_use"}]
    return ScriptedTurn.model_validate({"steps": steps})


def _tool_rounds(request: Any) -> int:
    """How many tool results follow the last user message."""
    rounds = 0
    for message in reversed(request["messages"]):
        if message["role"] == "user":
            break
        if message["role"] == "tool":
            rounds += 1
    return rounds


def _asked(request: Any) -> str:
    """The last thing the user said: the last text part of the last user message (a message
    after one whose run failed arrives merged with it, each in its own part)."""
    for message in reversed(request["messages"]):
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, str):
                return content.strip().rsplit("\n", 1)[-1]
            texts = [p.get("text", "") for p in content if p.get("type") == "text"]
            return texts[-1].strip() if texts else ""
    return ""


def console_model(request: Any) -> ScriptedResponse:
    """The answer to one Chat Completions request (see the module docstring)."""
    text = _asked(request)
    word = text.split(" ", 1)[0].lower()
    after_tool = last_role(request) == "tool"
    if word == "write":
        if after_tool:
            return text_answer("The report is in output/report.csv.", pieces=2)
        call = {"path": "output/report.csv", "content": REPORT_CSV}
        return _tool_turn("Writing the report. ", ("call_write", "write_file", call))
    if word == "ask":
        if after_tool:
            return text_answer(PART_TWO, delay_s=0.05, pieces=4)
        call = {"path": "output/approved.txt", "content": "approved\n"}
        return _tool_turn(PART_ONE, ("call_ask", "write_file", call), pace_s=0.05)
    if word == "slow":
        return text_answer(SLOW_TEXT, delay_s=0.1, pieces=len(SLOW_WORDS))
    if word == "fail":
        return ScriptedStatus(status=400, body={"error": {"message": "scripted refusal"}})
    if word == "plan":
        rounds = _tool_rounds(request)
        if rounds == 0:
            return _tool_turn("", ("call_list", "task_create_list", {"list_name": "launch"}))
        if rounds == 1:
            return _tool_turn(
                "",
                ("call_t1", "task_add", {"list_name": "launch", "title": "Write the notes"}),
                ("call_t2", "task_add", {"list_name": "launch", "title": "Ship it"}),
            )
        return text_answer("The plan is on the board.")
    return text_answer(f"Echo: {text}")
