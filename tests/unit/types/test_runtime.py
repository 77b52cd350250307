"""Runtime types: agent config, run state and handle, runtime events, context reports, task re-exports."""

from __future__ import annotations

import typing
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agent_core.errors import ErrorPayload, ProviderErrorPayload
from agent_core.types import runtime as rt
from agent_core.types import tasks as task_models
from agent_core.types.enums import EndReason, NodeType, PermissionPolicy, Role, RunStatus
from agent_core.types.protocol import (
    JsonBlock,
    PermissionRequest,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    Usage,
)

SID = "sess_20260612_153022_a1b2c3d4"
RUN = "run_0000000000000001"
AGENT = "agent_0000000000000001"
NODE = "node_0000000000000001"
WHEN = datetime(2026, 6, 12, 15, 30, 22, 5, tzinfo=UTC)
EV: dict[str, Any] = {"run_id": RUN, "session_id": SID, "agent_id": AGENT, "created_at": WHEN}

NODE_EXAMPLE = rt.Node(
    node_id=NODE,
    node_seq=1,
    agent_id=AGENT,
    run_id=RUN,
    role=Role.ASSISTANT,
    content=[TextBlock(text="hi"), ToolCallBlock(id="call_1", name="ls")],
    created_at=WHEN,
)
ERROR = ErrorPayload(type="tool_error", code="boom", message="it broke")

RUNTIME_EVENTS: list[BaseModel] = [
    rt.RunTextDelta(**EV, turn=0, text="Hel"),
    rt.RunToolStarted(**EV, tool_call_id="call_1", name="ls", arguments={"path": "."}),
    rt.RunToolResult(
        **EV, tool_call_id="call_1", name="ls", is_error=True, content=[JsonBlock(data=[1])]
    ),
    rt.RunNodeCreated(**EV, node=NODE_EXAMPLE),
    rt.RunStatusChanged(**EV, status=RunStatus.RUNNING, previous=RunStatus.QUEUED, attempt=1),
    rt.RunUsage(**EV, usage=Usage(input_tokens=1), total=Usage(input_tokens=5)),
    rt.RunPhase(**EV, phase="tools", turn=2, max_turns=50, tools=3),
    rt.RunPermissionRequested(
        **EV,
        request=PermissionRequest(
            request_id="perm_1",
            session_id=SID,
            run_id=RUN,
            agent_id=AGENT,
            tool_call=ToolCall(id="call_1", name="rm"),
        ),
    ),
    rt.RunTaskChanged(
        **EV, list_name="build", change="task_added", task_id="task_0123456789abcdef"
    ),
    rt.RunError(
        **EV,
        error=ProviderErrorPayload(type="provider_error", code="429", message="m", status_code=429),
        fatal=False,
    ),
    rt.RunFinished(
        **EV,
        status=RunStatus.FAILED,
        end_reason=EndReason.FAILED,
        usage=Usage(output_tokens=9),
        error=ERROR,
        last_node_id=NODE,
    ),
]

CONFIG = rt.AgentConfig(
    provider="openai",
    model="gpt-4o-mini",
    base_url="http://127.0.0.1:9999/v1",
    api_key_env="OPENAI_API_KEY",
    budget=rt.RunBudget(max_total_tokens=100_000, max_wall_clock_s=600),
    tool_policy=rt.ToolPolicy(allow=["read_file"], deny=["shell"], ask=["write_file"]),
    enabled_tools=["read_file", "write_file"],
    enabled_skills=[],
    system_prompt="be brief",
    temperature=0.2,
    max_output_tokens=4096,
    provider_options={"seed": 7},
    metadata={"purpose": "worker"},
)

RUN_STATE = rt.RunState(
    run_id=RUN, session_id=SID, agent_id=AGENT, attempt=1, status=RunStatus.RUNNING, turn=2
)

EXAMPLES: list[BaseModel] = [
    *RUNTIME_EVENTS,
    CONFIG,
    CONFIG.budget,
    CONFIG.tool_policy,
    rt.AgentConfigOverrides(max_turns=4, tool_policy=rt.ToolPolicy(ask=["lookup"])),
    RUN_STATE,
    RUN_STATE.handle(),
    rt.RunEnd(status="failed", end_reason="failed", turns=2, error=ERROR, last_node_id=NODE),
    NODE_EXAMPLE,
    rt.SessionState(session_id=SID, account_id="acct_1", cwd="/p", root_agent_id=AGENT),
    rt.AgentState(
        agent_id=AGENT,
        session_id=SID,
        agent_type="main",
        result=rt.ChildAgentResult(agent_id=AGENT, run_id=RUN, status="completed", text="ok"),
    ),
    rt.ChildAgentResult(agent_id=AGENT, run_id=RUN, status="failed", error=ERROR),
    rt.ArtifactRef(artifact_id="artifact_1", session_id=SID, path="output/a.csv", summary="s"),
    rt.TimelineEvent(event_id="evt_1", seq=1, event_type="node_created", node_id=NODE),
    rt.TaskStep(task_id="task_1", index=0, title="load data"),
    rt.ContextBuildReport(
        session_id=SID,
        agent_id=AGENT,
        run_id=RUN,
        active_node_id=NODE,
        node_ids=[NODE],
        token_estimate=120,
        injected=[
            rt.InjectedContext(
                node_type=NodeType.MEMORY_CONTEXT, source="memory:user.md", token_estimate=20
            )
        ],
        dropped=[rt.DroppedNode(node_id="node_0", reason="compacted")],
        budget=rt.ContextBudget(
            context_window=8192,
            output_reserve=2048,
            input_budget=6144,
            compact_at=4915,
            system=10,
            pinned=20,
            history=90,
            tools=30,
            total=150,
            estimated=150,
        ),
        compaction_node_id="node_c",
        compacted=1,
    ),
    rt.ContextPolicy(summary_model="small-model", max_continuations=1),
]
EXAMPLES += [EXAMPLES[-2].injected[0], EXAMPLES[-2].dropped[0], EXAMPLES[-2].budget]  # type: ignore[attr-defined]
EXAMPLES.append(rt.UsageTotals(runs=2, input_tokens=30, output_tokens=12, total_tokens=42))


def test_runtime_events_cover_the_union() -> None:
    members = set(typing.get_args(typing.get_args(rt.RuntimeEvent)[0]))
    assert {type(e) for e in RUNTIME_EVENTS} == members
    assert {e.type for e in RUNTIME_EVENTS} >= {"text_delta", "run_finished", "node_created"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("event", RUNTIME_EVENTS, ids=lambda e: e.type)  # type: ignore[attr-defined]
def test_runtime_events_round_trip_through_json(event: BaseModel) -> None:
    back = rt.RUNTIME_EVENT.validate_json(event.model_dump_json())
    assert back == event and type(back) is type(event)
    data = event.model_dump(mode="json")
    assert data["run_id"] == RUN and data["session_id"] == SID


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "thinking", "run_id": RUN, "session_id": SID},
        {"type": "text_delta", "run_id": RUN, "session_id": SID, "turn": 0, "text": "x", "seq": 1},
        {"type": "text_delta", "session_id": SID, "turn": 0, "text": "x"},
        {"type": "text_delta", "run_id": "node_1", "session_id": SID, "turn": 0, "text": "x"},
        {"type": "run_finished", "run_id": RUN, "session_id": SID, "status": "running"},
        {"type": "run_finished", "run_id": RUN, "session_id": SID, "status": "queued"},
    ],
)
def test_runtime_events_reject_bad_input(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        rt.RUNTIME_EVENT.validate_python(raw)


def test_runtime_timestamps_are_aware_and_utc() -> None:
    plus2 = datetime(2026, 6, 12, 17, 0, tzinfo=timezone(timedelta(hours=2)))
    event = rt.RunTextDelta(run_id=RUN, session_id=SID, turn=0, text="x", created_at=plus2)
    assert event.created_at.utcoffset() == timedelta(0)
    assert event.created_at == plus2
    assert (
        rt.RunTextDelta(run_id=RUN, session_id=SID, turn=0, text="x").created_at.tzinfo is not None
    )
    naive = datetime(2026, 1, 1)  # noqa: DTZ001 - the point of the test
    with pytest.raises(ValidationError):
        rt.RunTextDelta(run_id=RUN, session_id=SID, turn=0, text="x", created_at=naive)


def test_agent_config_round_trips_and_keeps_no_secret() -> None:
    assert rt.AgentConfig.model_validate_json(CONFIG.model_dump_json()) == CONFIG
    assert "api_key" not in rt.AgentConfig.model_fields
    minimal = rt.AgentConfig(provider="ollama", model="llama3")
    assert minimal.max_turns >= 1 and minimal.allow_platform_writes is False
    assert minimal.enabled_tools is None and minimal.tool_policy.default is PermissionPolicy.ASK


@pytest.mark.parametrize(
    "bad",
    [
        {"provider": ""},
        {"max_turns": 0},
        {"api_key_env": "sk-live-abc"},
        {"temperature": -0.1},
        {"max_output_tokens": 0},
        {"budget": {"max_total_tokens": 0}},
        {"tool_policy": {"default": "maybe"}},
        {"api_key": "sk-abc"},
    ],
)
def test_agent_config_rejects_bad_values(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        rt.AgentConfig.model_validate({"provider": "openai", "model": "m", **bad})


def test_tool_policy_precedence_deny_ask_allow_default() -> None:
    policy = rt.ToolPolicy(
        default=PermissionPolicy.ALLOW, allow=["a", "b", "c"], ask=["b", "c"], deny=["c"]
    )
    assert [policy.policy_for(n) for n in "abcd"] == [
        PermissionPolicy.ALLOW,
        PermissionPolicy.ASK,
        PermissionPolicy.DENY,
        PermissionPolicy.ALLOW,
    ]


def test_run_state_handle_and_terminal() -> None:
    handle = RUN_STATE.handle()
    assert (handle.run_id, handle.session_id, handle.agent_id, handle.attempt) == (
        RUN,
        SID,
        AGENT,
        1,
    )
    assert not RUN_STATE.is_terminal
    assert RUN_STATE.model_copy(update={"status": RunStatus.ABORTED}).is_terminal
    assert rt.RunState.model_validate_json(RUN_STATE.model_dump_json()) == RUN_STATE
    with pytest.raises(ValidationError):
        rt.RunHandle(run_id=RUN, session_id=SID, agent_id=AGENT, attempt=-1)


def test_artifact_ref_block_keeps_only_display_fields() -> None:
    ref = rt.ArtifactRef(
        artifact_id="artifact_1", session_id=SID, path="output/secret/a.csv", size_bytes=5
    )
    block = ref.to_block()
    assert block.artifact_id == "artifact_1"
    assert "path" not in block.model_dump() and "size_bytes" not in block.model_dump()


def test_task_types_are_the_task_domains_own() -> None:
    assert rt.Task is task_models.Task
    assert rt.TaskDAG is task_models.TaskDAG
    assert rt.TaskWalEvent is task_models.TaskWalEvent
    assert rt.Plan is task_models.PlanRef
    with pytest.raises(ValidationError):
        rt.TaskStep(task_id="task_1", index=0, title="x", status="blocked")


def test_stored_overrides_are_what_a_client_may_set() -> None:
    good = {"max_turns": 4, "tool_policy": {"ask": ["lookup"]}}
    assert rt.overrides_from(good) == {
        "max_turns": 4,
        "tool_policy": {"ask": ["lookup"]},  # no default: the layer below keeps its own
    }
    # Never a provider, endpoint or key variable; a value written under older rules is ignored.
    assert rt.overrides_from({"base_url": "http://x"}) == {}
    assert rt.overrides_from({"max_turns": 0}) == {}
    assert rt.overrides_from("x") == {} and rt.overrides_from(None) == {}


def test_a_run_ends_in_a_terminal_status_and_says_so_on_its_stream() -> None:
    with pytest.raises(ValueError, match="terminal"):
        rt.RunEnd(status="running", end_reason="completed")
    end = rt.RunEnd(status="cancelled", end_reason="aborted_tools", turns=3, last_node_id=NODE)
    finished = rt.RunFinished.of(RUN_STATE.handle(), end)
    assert (finished.status, finished.end_reason, finished.turns) == (
        "cancelled",
        "aborted_tools",
        3,
    )
    assert (finished.run_id, finished.last_node_id) == (RUN, NODE)
