"""The agent loop and its ports, how a run is driven and ended; a scripted model and lookup tool
for tests, benchmarks and demos."""

from agent_core.runtime.drive import (
    Fenced,
    RunFailure,
    RunningRuns,
    RunProgress,
    drive,
    failure_payload,
)
from agent_core.runtime.ending import PARTIAL, Ending, cancelled_reason, ending
from agent_core.runtime.lookup_tool import LookupArgs, LookupTool
from agent_core.runtime.loop import AgentLoop, LoopPhase
from agent_core.runtime.ports import EventSink, RunStore, ToolRunner
from agent_core.runtime.resume import ResumePoint, resume_point
from agent_core.runtime.scripted import ScriptedModel, ScriptedReply, tool_then_answer

__all__ = [
    "PARTIAL",
    "AgentLoop",
    "Ending",
    "EventSink",
    "Fenced",
    "LookupArgs",
    "LookupTool",
    "LoopPhase",
    "ResumePoint",
    "RunFailure",
    "RunProgress",
    "RunStore",
    "RunningRuns",
    "ScriptedModel",
    "ScriptedReply",
    "ToolRunner",
    "cancelled_reason",
    "drive",
    "ending",
    "failure_payload",
    "resume_point",
    "tool_then_answer",
]
