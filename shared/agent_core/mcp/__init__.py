"""MCP servers the operator configures: their tools, namespaced by server, for agents to use.

Only the configuration is imported here (every service loads it); the run-worker imports
:mod:`agent_core.mcp.tools` (and with it the MCP SDK) when servers are configured.
See ``docs/architecture.md``, "Extensions: MCP servers, plug-ins, named providers and agents".
"""

from agent_core.config.mcp import McpServerSettings, McpSettings

__all__ = ["McpServerSettings", "McpSettings"]
