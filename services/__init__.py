"""Service shells: wiring of bus subscribers and HTTP routes to agent_core."""
