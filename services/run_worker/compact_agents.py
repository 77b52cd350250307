"""The agents that write compactions' summaries: one ``sub`` agent row per compaction, with
``metadata.purpose = "compact"``, created by the run that compacts and ended with it.

The summary itself is a model call made in the run's process (its own model setting and budget,
``agent_config.context``); the row makes it visible among the session's agents — who wrote the
summary, with which model, for which compaction node and whether it succeeded.
"""

from __future__ import annotations

from typing import Any

from agent_core.bus.contracts.storage import CreateAgent, RunFence, UpdateAgent
from agent_core.ids import new_id
from agent_core.storage_client import StorageClient, raise_for_receipt
from agent_core.types.enums import AgentStatus, AgentType, EndReason, RunStatus
from agent_core.types.protocol import Usage
from agent_core.types.runtime import ChildAgentResult, RunHandle

__all__ = ["BusCompactAgents"]


class BusCompactAgents:
    """Creates and ends compact agents of one run attempt (see :class:`CompactAgents`)."""

    def __init__(self, storage: StorageClient, handle: RunHandle) -> None:
        self._storage = storage
        self._handle = handle

    async def start(self, metadata: dict[str, Any]) -> str:
        """A new compact agent under the run's agent; its id."""
        agent_id = new_id("agent")
        raise_for_receipt(
            await self._storage.send(
                CreateAgent(
                    command_id=new_id("cmd"),
                    session_id=self._handle.session_id,
                    agent_id=agent_id,
                    agent_type=AgentType.SUB,
                    parent_agent_id=self._handle.agent_id,
                    created_by_run_id=self._handle.run_id,
                    metadata={**metadata, "purpose": "compact"},
                )
            )
        )
        return agent_id

    async def finish(self, agent_id: str, *, ok: bool, result: dict[str, Any]) -> None:
        """End the compact agent ``completed`` (a summary) or ``failed`` (the trim fallback);
        its result says which compaction node it wrote (``data``) and what it used."""
        usage = result.get("usage")
        handed = ChildAgentResult(
            agent_id=agent_id,
            run_id=self._handle.run_id,
            status=RunStatus.COMPLETED if ok else RunStatus.FAILED,
            end_reason=EndReason.COMPLETED if ok else EndReason.FAILED,
            data={k: v for k, v in result.items() if k != "usage"},
            usage=usage if isinstance(usage, Usage) else Usage(),
        )
        raise_for_receipt(
            await self._storage.send(
                UpdateAgent(
                    command_id=new_id("cmd"),
                    session_id=self._handle.session_id,
                    agent_id=agent_id,
                    status=AgentStatus.COMPLETED if ok else AgentStatus.FAILED,
                    result=handed.model_dump(mode="json"),
                    fence=RunFence(run_id=self._handle.run_id, attempt=self._handle.attempt),
                )
            )
        )
