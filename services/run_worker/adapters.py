"""Bus-backed implementations of the loop's ports for one run attempt."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agent_core.bus.contracts.storage import (
    AppendNodeResult,
    CreateArtifact,
    RunFence,
)
from agent_core.context import estimate_tokens
from agent_core.ids import new_id
from agent_core.observability.instrument import tool_call
from agent_core.skills import RunSkills
from agent_core.storage_client import StorageClient, raise_for_receipt
from agent_core.tools import (
    OutputFile,
    SavedToolOutput,
    SessionPath,
    ToolExecutor,
    ToolRegistry,
    Workspace,
)
from agent_core.types.enums import EventLevel, EventType, NodeType
from agent_core.types.protocol import (
    ToolCall,
    ToolDefinition,
    ToolResult,
)
from agent_core.types.runtime import ArtifactRef, Node, RunHandle, TimelineEvent

__all__ = [
    "BusRunStore",
    "StorageArtifactSink",
    "WorkerToolRunner",
    "node_drafts",
]


def node_drafts(node: Node, payload: dict[str, Any] | None = None) -> tuple[Node, TimelineEvent]:
    """``node`` as it is sent to be appended (the writer's fields unset) and its
    ``node_created`` event.

    The node's token estimate is recorded with it, so context building reads it instead of
    estimating the whole history again on every model call.
    """
    token_count = node.token_count
    if token_count is None:
        token_count = estimate_tokens(node.content)
    draft = node.model_copy(update={"node_seq": None, "token_count": token_count})
    event = TimelineEvent(
        event_id=new_id("evt"),
        event_type=EventType.NODE_CREATED,
        agent_id=node.agent_id,
        run_id=node.run_id,
        node_id=node.node_id,
        payload={"role": node.role.value, "node_type": node.node_type.value, **(payload or {})},
    )
    return draft, event


class BusRunStore:
    """Writes of one attempt, fenced by ``(run_id, attempt)``: a stale attempt is refused."""

    def __init__(
        self, storage: StorageClient, handle: RunHandle, *, set_active: bool = True
    ) -> None:
        self._storage = storage
        self.handle = handle
        self.set_active = set_active  # branch and child runs leave the session's active node
        self.fence = RunFence(run_id=handle.run_id, attempt=handle.attempt)

    async def append_node(
        self,
        node: Node,
        *,
        payload: dict[str, Any] | None = None,
        events: Sequence[TimelineEvent] = (),
    ) -> Node:
        """Node + ``node_created`` event (+ ``events``) in one transaction (see
        :func:`node_drafts`); a ``memory_context`` node brings its ``memory_injected`` event.
        Returns the node with its seq."""
        draft, event = node_drafts(node, payload)
        if node.node_type is NodeType.MEMORY_CONTEXT:
            events = [*events, self._memory_injected(node)]
        result = AppendNodeResult.of(
            await self._storage.append_node(
                self.handle.session_id,
                draft,
                event,
                fence=self.fence,
                set_active=self.set_active,
                events=events,
            )
        )
        return node.model_copy(
            update={"node_seq": result.node_seq, "token_count": draft.token_count}
        )

    def _memory_injected(self, node: Node) -> TimelineEvent:
        chars = sum(len(getattr(b, "text", "")) for b in node.content)
        return TimelineEvent(
            event_id=new_id("evt"),
            event_type=EventType.MEMORY_INJECTED,
            agent_id=self.handle.agent_id,
            run_id=self.handle.run_id,
            payload={"chars": chars, **({"skill": s} if (s := node.metadata.get("skill")) else {})},
        )

    async def append_event(
        self,
        event_type: EventType,
        *,
        level: EventLevel = EventLevel.INFO,
        node_id: str | None = None,
        tool_call_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        """A timeline event of this run."""
        event = TimelineEvent(
            event_id=new_id("evt"),
            event_type=event_type,
            level=level,
            agent_id=self.handle.agent_id,
            run_id=self.handle.run_id,
            node_id=node_id,
            tool_call_id=tool_call_id,
            payload=payload or {},
        )
        raise_for_receipt(
            await self._storage.append_event(self.handle.session_id, event, fence=self.fence)
        )


_TOOL_OUTPUT_DIR = ("scratchpad", "tool-outputs")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_\-]")


class StorageArtifactSink:
    """Registers files written to ``output/`` as artifacts, and saves long tool outputs whole.

    A tool output above the inline cap is written to ``scratchpad/tool-outputs/<call id>.txt``
    through the workspace's symlink-safe writer (an agent cannot redirect it out of the session)
    and registered as an artifact, so the model's cut copy can point at the whole text.
    """

    def __init__(self, storage: StorageClient, handle: RunHandle, workspace: Workspace) -> None:
        self._storage = storage
        self._handle = handle
        self._workspace = workspace

    async def register_output_file(self, file: OutputFile) -> str | None:
        """One ``create_artifact`` command per new or changed file."""
        return await self._register(
            file.path, file.mime_type, file.size_bytes, file.tool_call_id, file.node_id
        )

    async def save_tool_output(self, output: SavedToolOutput) -> str | None:
        """Write the whole output beside the session's scratch files and register it."""
        name = (_SAFE_NAME.sub("_", output.tool_call_id)[:80] or "output") + ".txt"
        return await self.save_text(
            (*_TOOL_OUTPUT_DIR, name),
            output.text,
            tool_call_id=output.tool_call_id,
            summary=f"full output of {output.tool_name}",
        )

    async def save_text(
        self,
        parts: tuple[str, ...],
        text: str,
        *,
        tool_call_id: str | None = None,
        summary: str | None = None,
    ) -> str | None:
        """Write ``text`` at the session path ``parts`` (symlink-safe) and register it as an
        artifact of the run (fenced); its id, ``None`` when the writer refused it."""
        data = text.encode("utf-8", "replace")
        fs = self._workspace.fs
        written = await asyncio.to_thread(
            fs.write_bytes, SessionPath(parts), data, check=self._workspace.check_write
        )
        return await self._register(
            str(written), "text/plain", len(data), tool_call_id, None, summary=summary
        )

    async def _register(
        self,
        path: str,
        mime_type: str,
        size: int,
        tool_call_id: str | None,
        node_id: str | None,
        *,
        summary: str | None = None,
    ) -> str | None:
        artifact_id = new_id("artifact")
        receipt = await self._storage.send(
            CreateArtifact(
                command_id=new_id("cmd"),
                session_id=self._handle.session_id,
                artifact=ArtifactRef(
                    artifact_id=artifact_id,
                    session_id=self._handle.session_id,
                    path=path,
                    agent_id=self._handle.agent_id,
                    run_id=self._handle.run_id,
                    node_id=node_id,
                    tool_call_id=tool_call_id,
                    filename=path.rsplit("/", 1)[-1],
                    mime_type=mime_type,
                    size_bytes=size,
                    summary=summary,
                ),
                fence=RunFence(run_id=self._handle.run_id, attempt=self._handle.attempt),
            )
        )
        return artifact_id if receipt.ok else None


class WorkerToolRunner:
    """The run's tools: the registry filtered by the agent's ``enabled_tools``, narrowed while
    loaded skills declare ``allowed_tools`` (``skills``)."""

    def __init__(
        self,
        executor: ToolExecutor,
        definitions: Sequence[ToolDefinition],
        skills: RunSkills | None = None,
        *,
        after_call: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._executor = executor
        self._definitions = definitions
        self._skills = skills
        # Syncs the session's folder to the file store once a call is done (s3 engine).
        self._after_call = after_call

    @staticmethod
    def definitions_for(
        registry: ToolRegistry, enabled: Sequence[str] | None
    ) -> list[ToolDefinition]:
        """Definitions of the registry's tools that ``enabled`` admits (``None``: all)."""
        return [t.definition() for t in registry if enabled is None or t.name in enabled]

    def definitions(self) -> Sequence[ToolDefinition]:
        """Definitions of the enabled tools (as the active skills narrow them)."""
        return self._skills.narrow(self._definitions) if self._skills else self._definitions

    def repeatable(self, name: str) -> bool:
        """Whether the tool ``name`` declares itself safe to run again (see ``Tool.repeatable``);
        ``False`` for a tool this run does not have."""
        tool = self._executor.registry.get(name)
        return tool is not None and tool.repeatable

    async def execute(self, call: ToolCall, *, node_id: str | None = None) -> ToolResult:
        """Run one call through the tool executor (validation, permission, timeout, caps);
        measured as one tool call (span, duration and outcome by tool)."""
        refused = self._skills.refusal(call) if self._skills else None
        if refused is not None:  # outside the active skills' allowed tools
            return refused
        with tool_call(call.name, call.id) as measure:
            result = await self._executor.execute(call, node_id=node_id)
            if result.is_error:
                measure.failed(str(result.metadata.get("error_code", "tool_error")))
        if self._after_call is not None:
            await self._after_call()
        return result
