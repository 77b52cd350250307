"""The agent loop and its ports; a scripted model and lookup tool for tests, benchmarks and demos."""

from agent_core.runtime.lookup_tool import LookupArgs, LookupTool
from agent_core.runtime.loop import AgentLoop, LoopPhase
from agent_core.runtime.ports import EventSink, RunOutcome, RunStore, ToolRunner
from agent_core.runtime.resume import ResumePoint, resume_point
from agent_core.runtime.scripted import ScriptedModel, ScriptedReply, tool_then_answer

__all__ = [
    "AgentLoop",
    "EventSink",
    "LookupArgs",
    "LookupTool",
    "LoopPhase",
    "ResumePoint",
    "RunOutcome",
    "RunStore",
    "ScriptedModel",
    "ScriptedReply",
    "ToolRunner",
    "resume_point",
    "tool_then_answer",
]
