"""Message contracts of every stream: one discriminated union and one ``TypeAdapter`` per stream."""

from agent_core.bus.contracts import assistants, dead_letter, health, memory, runs, storage, tasks

__all__ = ["assistants", "dead_letter", "health", "memory", "runs", "storage", "tasks"]
