"""Agent tools: session workspace, path routing, tool framework and built-in tools."""

__all__: list[str] = []
