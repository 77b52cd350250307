"""``lookup``: a read-only tool with a fixed ~300-byte answer, used with the scripted model."""

from __future__ import annotations

from pydantic import Field

from agent_core.tools.base import Tool, ToolArgs, ToolContext, ToolOutput

__all__ = ["LookupArgs", "LookupTool"]


class LookupArgs(ToolArgs):
    """Arguments of ``lookup``."""

    q: str = Field(default="", max_length=1000, description="what to look up")


class LookupTool(Tool[LookupArgs]):
    """Answers every query with the same ~300 bytes (benchmarks and demos only)."""

    name = "lookup"
    repeatable = True  # read-only
    description = "Look something up (demo tool: always returns the same short text)."
    input_model = LookupArgs
    writes = False

    async def run(self, args: LookupArgs, ctx: ToolContext) -> ToolOutput:
        """Return a fixed result."""
        return ToolOutput("r" * 300)
