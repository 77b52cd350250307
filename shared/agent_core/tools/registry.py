"""A registry of tools, one per runtime (no global registry: each agent run gets its own set)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from agent_core.errors import ConfigError
from agent_core.tools.base import Tool
from agent_core.types.protocol import ToolDefinition

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """Tools by name; names are unique."""

    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool[Any]) -> None:
        """Add a tool; a second tool with the same name is a configuration error."""
        if tool.name in self._tools:
            raise ConfigError("duplicate_tool", f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool[Any] | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._tools)

    def definitions(self) -> list[ToolDefinition]:
        """Provider-facing definitions of every tool, sorted by name."""
        return [self._tools[name].definition() for name in self.names()]

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter([self._tools[name] for name in self.names()])

    def __len__(self) -> int:
        return len(self._tools)
