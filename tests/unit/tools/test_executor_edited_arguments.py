"""A call approved with edited arguments runs with them; edited arguments the tool refuses are
reported, and the call does not run."""

from __future__ import annotations

from agent_core.tools import PermissionRules, Workspace
from agent_core.tools.permissions import PermissionBroker
from agent_core.types.enums import PermissionBehavior, PermissionPolicy
from agent_core.types.protocol import PermissionDecision, PermissionRequest, ToolCall
from tests.unit.tools.test_executor import make_executor, ws  # noqa: F401  (the fixture)


def _approving(arguments: dict[str, object], seen: list[PermissionRequest]) -> PermissionBroker:
    async def broker(request: PermissionRequest) -> PermissionDecision:
        seen.append(request)
        return PermissionDecision(
            request_id=request.request_id, behavior=PermissionBehavior.ALLOW, arguments=arguments
        )

    return broker


async def test_the_call_runs_with_the_edited_arguments(ws: Workspace) -> None:  # noqa: F811
    seen: list[PermissionRequest] = []
    rules = PermissionRules(per_tool={"echo": PermissionPolicy.ASK})
    executor = make_executor(ws, rules=rules, broker=_approving({"text": "edited"}, seen))
    result = await executor.execute(ToolCall(id="c1", name="echo", arguments={"text": "model"}))
    assert not result.is_error and result.content[0].text == "edited"  # type: ignore[union-attr]
    assert result.metadata["permission"]["edited_arguments"] == {"text": "edited"}
    # The request said what the arguments may be.
    assert seen[0].input_schema is not None and seen[0].input_schema["required"] == ["text"]


async def test_edited_arguments_the_tool_refuses_do_not_run(ws: Workspace) -> None:  # noqa: F811
    rules = PermissionRules(per_tool={"echo": PermissionPolicy.ASK})
    executor = make_executor(ws, rules=rules, broker=_approving({"text": ""}, []))
    result = await executor.execute(ToolCall(id="c1", name="echo", arguments={"text": "model"}))
    assert result.is_error and result.metadata["error_code"] == "invalid_arguments"
    assert "text" in result.content[0].text  # type: ignore[union-attr]
