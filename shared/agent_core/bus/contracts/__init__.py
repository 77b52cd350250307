"""Message contracts of every stream: one discriminated union and one ``TypeAdapter`` per stream."""

from agent_core.bus.contracts import dead_letter, health, memory, runs, storage, tasks

__all__ = ["dead_letter", "health", "memory", "runs", "storage", "tasks"]
