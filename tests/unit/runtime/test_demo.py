"""The demo model's script (pure logic): each word plays its steps, one per model call, counted
by the tool results since the user's message; anything else is the benchmarks' lookup turn; a
tool that asks first is asked for unless the policy names it."""

from __future__ import annotations

import pytest

from agent_core.errors import ProviderError
from agent_core.runtime.demo import SCRIPTS, demo_reply
from agent_core.tools import PermissionRules
from agent_core.types.enums import PermissionPolicy, Role
from agent_core.types.protocol import ModelMessage, ModelRequest, TextBlock, ToolResultBlock


def _request(text: str, results: int = 0) -> ModelRequest:
    messages = [ModelMessage(role=Role.USER, content=[TextBlock(text=text)])]
    for i in range(results):
        messages.append(
            ModelMessage(
                role=Role.TOOL,
                content=[ToolResultBlock(tool_call_id=f"call_{i}", content=[TextBlock(text="ok")])],
            )
        )
    return ModelRequest(model="fake", messages=messages)


@pytest.mark.parametrize(
    ("word", "tools"),
    [
        ("files", ["write_file", "read_file"]),
        ("code", ["run_python"]),
        ("tasks", ["task_create_list", "task_add", "task_add", "task_list"]),
        ("worker", ["dispatch_worker"]),
        ("permission", ["publish_report"]),
    ],
)
def test_each_word_plays_its_tools_then_answers(word: str, tools: list[str]) -> None:
    called = []
    for step in range(len(tools)):
        reply = demo_reply(_request(f"Show me {word.upper()}, please", step))
        called += [c.name for c in reply.tool_calls]
    assert called == tools
    last = demo_reply(_request(word, len(tools)))
    assert last.tool_calls == [] and last.text.startswith("[demo model]")
    assert len(SCRIPTS[word]) == len(tools) + 1


def test_help_long_fail_and_anything_else() -> None:
    assert "- permission:" in demo_reply(_request("help")).text
    long = demo_reply(_request("a long one"))
    assert len(long.pieces) > 200 and all(len(p.split()) == 1 for p in long.pieces)
    with pytest.raises(ProviderError) as failed:
        demo_reply(_request("please fail"))
    assert failed.value.code == "demo_failure"
    other = demo_reply(_request("hello there"))  # not "help": words, not prefixes
    assert [c.name for c in other.tool_calls] == ["lookup"]
    answer = demo_reply(_request("hello there", 1)).text
    assert len(answer) > 900 and answer.endswith(".")  # ~1 KB, not cut mid-word


def test_a_tool_that_asks_first_is_asked_for_unless_the_policy_names_it() -> None:
    allow = PermissionRules()
    assert allow.policy_for("publish_report", writes=False, asks_first=True) is PermissionPolicy.ASK
    named = PermissionRules(per_tool={"publish_report": PermissionPolicy.ALLOW})
    assert named.policy_for("publish_report", writes=False, asks_first=True) is (
        PermissionPolicy.ALLOW
    )
    deny = PermissionRules(default=PermissionPolicy.DENY)
    assert deny.policy_for("publish_report", writes=False, asks_first=True) is (
        PermissionPolicy.DENY
    )
    assert allow.policy_for("read_file", writes=False) is PermissionPolicy.ALLOW
