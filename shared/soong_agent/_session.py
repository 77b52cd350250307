"""Handles on one session and one run: every ``/v1/sessions/{id}/…`` operation.

A handle holds ids only and does no I/O when made; each method is one request (or, for
``send`` and ``events``, one resumable stream). Answers are the server's own types.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from agent_core.bus.contracts.tasks import TaskDagView, TaskListsView
from agent_core.hooks.effective import HookList
from agent_core.skills.model import SkillList
from agent_core.types.api import (
    AgentList,
    ArtifactList,
    EventList,
    FileEntry,
    FileList,
    MessageAccepted,
    ModelContext,
    NodePath,
    PermissionList,
    RunFiles,
    RunList,
    SessionDeleted,
    SessionExport,
    Tree,
    UploadedFile,
    UploadedFiles,
)
from agent_core.types.enums import MultitaskStrategy, PermissionBehavior, SessionStatus
from agent_core.types.protocol import PermissionDecision, PermissionRequest
from agent_core.types.runtime import (
    AgentConfigOverrides,
    AgentState,
    ArtifactRef,
    ContextBuildReport,
    Node,
    RunFinished,
    RunState,
    SessionState,
    TimelineEvent,
)
from soong_agent import _operations as ops
from soong_agent._http import IDEMPOTENCY_KEY, HttpCore
from soong_agent._stream import RunStream

__all__ = ["AsyncRun", "AsyncSession", "message_body", "new_idempotency_key"]

Area = Literal["all", "input", "scratchpad", "output"]


def new_idempotency_key() -> str:
    """A fresh ``Idempotency-Key``: 128 random bits, URL-safe (printable ASCII, no spaces)."""
    return secrets.token_urlsafe(16)


def message_body(
    text: str | None,
    *,
    content: list[dict[str, Any]] | None,
    parent_node_id: str | None,
    multitask_strategy: MultitaskStrategy | str | None,
    agent_config: AgentConfigOverrides | dict[str, Any] | None,
    stream: bool,
) -> dict[str, Any]:
    """The JSON of ``POST …/messages``: only the fields given (the server validates them)."""
    body: dict[str, Any] = {"stream": stream}
    if text is not None:
        body["text"] = text
    if content is not None:
        body["content"] = content
    if parent_node_id is not None:
        body["parent_node_id"] = parent_node_id
    if multitask_strategy is not None:
        body["multitask_strategy"] = str(multitask_strategy)
    if agent_config is not None:
        body["agent_config"] = _config_json(agent_config)
    return body


def _config_json(config: AgentConfigOverrides | dict[str, Any]) -> dict[str, Any]:
    if isinstance(config, AgentConfigOverrides):
        return config.model_dump(mode="json", exclude_unset=True)
    return config


class AsyncRun:
    """One run of a session."""

    def __init__(self, http: HttpCore, session_id: str, run_id: str, *, reconnect_s: float) -> None:
        self.session_id = session_id
        self.id = run_id
        self._http = http
        self._reconnect_s = reconnect_s

    def _params(self) -> dict[str, str]:
        return {"session_id": self.session_id, "run_id": self.id}

    async def get(self) -> RunState:
        """The run's state."""
        return await self._http.model(ops.GET_RUN, RunState, self._params())

    async def files(self) -> RunFiles:
        """The files the run's tool calls created, modified or deleted in ``output/`` and
        ``scratchpad/``, each with the call that did it."""
        return await self._http.model(ops.RUN_FILES, RunFiles, self._params())

    async def cancel(self, *, wait: bool = False, timeout_s: float = 30.0) -> RunState:
        """Ask the run to stop; with ``wait`` answer once it ended (or ``timeout_s`` passed)."""
        query = {"wait": "true" if wait else "false", "timeout_s": timeout_s}
        return await self._http.model(ops.CANCEL_RUN, RunState, self._params(), query=query)

    def events(
        self, *, last_event_id: str | None = None, cancel_on_exit: bool = False
    ) -> RunStream:
        """The run's events from its start (or after ``last_event_id``) until it finished."""
        return RunStream(
            self._http,
            self.session_id,
            run_id=self.id,
            last_event_id=last_event_id,
            cancel_on_exit=cancel_on_exit,
            reconnect_timeout_s=self._reconnect_s,
        )

    async def wait(self) -> RunFinished:
        """Follow the run's events until it finished; its ``run_finished``."""
        return await self.events().wait()


class AsyncSession:
    """One session: messages, runs, the tree, files, artifacts, tasks and permissions."""

    def __init__(self, http: HttpCore, session_id: str, *, reconnect_s: float = 60.0) -> None:
        self.id = session_id
        self._http = http
        self._reconnect_s = reconnect_s

    def __repr__(self) -> str:
        return f"<AsyncSession {self.id}>"

    def _p(self, **more: str) -> dict[str, str]:
        return {"session_id": self.id, **more}

    # ---------------------------------------------------------------- the session itself

    async def get(self) -> SessionState:
        """The session's state (status, active node, metadata, …)."""
        return await self._http.model(ops.GET_SESSION, SessionState, self._p())

    async def update(
        self, *, status: SessionStatus | str | None = None, metadata: dict[str, Any] | None = None
    ) -> SessionState:
        """Set the status (archive/unarchive) and/or replace the metadata."""
        body: dict[str, Any] = {}
        if status is not None:
            body["status"] = str(status)
        if metadata is not None:
            body["metadata"] = metadata
        return await self._http.model(ops.PATCH_SESSION, SessionState, self._p(), json=body)

    async def archive(self) -> SessionState:
        """Archive the session (it refuses new messages until unarchived)."""
        return await self.update(status=SessionStatus.ARCHIVED)

    async def unarchive(self) -> SessionState:
        """Make an archived session active again."""
        return await self.update(status=SessionStatus.ACTIVE)

    async def delete(self) -> SessionDeleted:
        """Delete the session with its tree, runs, files and search entries (recorded in the
        account's audit log); a :class:`ConflictError` ``runs_active`` while a run has not ended."""
        return await self._http.model(ops.DELETE_SESSION, SessionDeleted, self._p())

    async def export(self) -> SessionExport:
        """The whole session as one document: agents, every node, runs, events, artifacts."""
        return await self._http.model(ops.EXPORT_SESSION, SessionExport, self._p())

    # ---------------------------------------------------------------- messages and runs

    def send(
        self,
        text: str | None = None,
        *,
        content: list[dict[str, Any]] | None = None,
        parent_node_id: str | None = None,
        multitask_strategy: MultitaskStrategy | str | None = None,
        agent_config: AgentConfigOverrides | dict[str, Any] | None = None,
        cancel_on_exit: bool = False,
        idempotency_key: str | None = None,
    ) -> RunStream:
        """Send a message and stream its run: ``async for event in session.send("hi")``.

        Nothing is sent until the stream is iterated or entered (``async with``). See
        :class:`RunStream` for resumption and ``cancel_on_exit``. The post carries an
        ``Idempotency-Key`` (``idempotency_key``, else a new random one), so a post whose
        connection broke or that met a 502/503/504 is sent again without a second run.
        """
        body = message_body(
            text,
            content=content,
            parent_node_id=parent_node_id,
            multitask_strategy=multitask_strategy,
            agent_config=agent_config,
            stream=True,
        )
        return RunStream(
            self._http,
            self.id,
            message=body,
            idempotency_key=idempotency_key or new_idempotency_key(),
            cancel_on_exit=cancel_on_exit,
            reconnect_timeout_s=self._reconnect_s,
        )

    async def post(
        self,
        text: str | None = None,
        *,
        content: list[dict[str, Any]] | None = None,
        parent_node_id: str | None = None,
        multitask_strategy: MultitaskStrategy | str | None = None,
        agent_config: AgentConfigOverrides | dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> MessageAccepted:
        """Send a message without streaming: its run is queued (follow it with :meth:`run`).

        The post carries an ``Idempotency-Key`` (``idempotency_key``, else a new random one), so
        it is retried like a read after a broken connection or a 502/503/504, without a second
        run. Give your own key to make a retry safe across restarts of your program too."""
        body = message_body(
            text,
            content=content,
            parent_node_id=parent_node_id,
            multitask_strategy=multitask_strategy,
            agent_config=agent_config,
            stream=False,
        )
        headers = {IDEMPOTENCY_KEY: idempotency_key or new_idempotency_key()}
        return await self._http.model(
            ops.POST_MESSAGE, MessageAccepted, self._p(), json=body, headers=headers
        )

    async def compact(self) -> MessageAccepted:
        """Compact the session's context now: a queued run summarizes the older conversation
        into a ``compaction`` node (the summarized nodes stay in the tree)."""
        return await self._http.model(ops.COMPACT, MessageAccepted, self._p())

    async def runs(self) -> list[RunState]:
        """The session's runs, oldest first."""
        return (await self._http.model(ops.LIST_RUNS, RunList, self._p())).items

    def run(self, run_id: str) -> AsyncRun:
        """A handle on one run of this session (no request)."""
        return AsyncRun(self._http, self.id, run_id, reconnect_s=self._reconnect_s)

    # ---------------------------------------------------------------- tree and timeline

    async def tree(self) -> Tree:
        """Every node (compact) and the active node."""
        return await self._http.model(ops.TREE, Tree, self._p())

    async def path(
        self, node_id: str | None = None, *, after_node_id: str | None = None
    ) -> NodePath:
        """Full nodes from the root to ``node_id`` (the active node by default); with
        ``after_node_id`` on that path, only the nodes after it."""
        query = {"node_id": node_id, "after_node_id": after_node_id}
        return await self._http.model(ops.PATH, NodePath, self._p(), query=query)

    async def node(self, node_id: str) -> Node:
        """One node with its full content."""
        return await self._http.model(ops.GET_NODE, Node, self._p(node_id=node_id))

    async def context(self, node_id: str) -> ContextBuildReport:
        """What the model would see if a run continued from ``node_id``."""
        return await self._http.model(
            ops.NODE_CONTEXT, ContextBuildReport, self._p(node_id=node_id)
        )

    async def regenerate(
        self,
        node_id: str,
        *,
        multitask_strategy: MultitaskStrategy | str | None = None,
        agent_config: AgentConfigOverrides | dict[str, Any] | None = None,
    ) -> MessageAccepted:
        """Answer a user message again (``node_id``: the message, or a node of the turn that
        answered it): a new run, queued, beside the earlier answer (follow it with :meth:`run`)."""
        body: dict[str, Any] = {}
        if multitask_strategy is not None:
            body["multitask_strategy"] = str(multitask_strategy)
        if agent_config is not None:
            body["agent_config"] = _config_json(agent_config)
        return await self._http.model(
            ops.REGENERATE, MessageAccepted, self._p(node_id=node_id), json=body
        )

    async def model_context(self, node_id: str) -> ModelContext:
        """The model's full context at ``node_id``: for an assistant node what the model was
        sent to produce it, else what a run continuing from it would send."""
        return await self._http.model(ops.MODEL_CONTEXT, ModelContext, self._p(node_id=node_id))

    async def switch_node(self, node_id: str) -> SessionState:
        """Make ``node_id`` the active node: the next message continues from it."""
        return await self._http.model(
            ops.SWITCH_NODE, SessionState, self._p(), json={"node_id": node_id}
        )

    async def timeline(
        self, *, after_seq: int = 0, run_id: str | None = None, limit: int = 200
    ) -> EventList:
        """One page of the durable timeline after ``after_seq`` (optionally of one run)."""
        query = {"after_seq": after_seq, "run_id": run_id, "limit": limit}
        return await self._http.model(ops.LIST_EVENTS, EventList, self._p(), query=query)

    async def all_timeline(self, *, run_id: str | None = None) -> list[TimelineEvent]:
        """The whole durable timeline (every page), in ``seq`` order."""
        events: list[TimelineEvent] = []
        after = 0
        while True:
            page = await self.timeline(after_seq=after, run_id=run_id, limit=1000)
            events += page.items
            if page.next_after_seq is None:
                return events
            after = page.next_after_seq

    async def agents(self) -> list[AgentState]:
        """The session's agents (main, orchestrator, workers, forks)."""
        return (await self._http.model(ops.LIST_AGENTS, AgentList, self._p())).items

    async def skills(self) -> SkillList:
        """The skills in effect for this session (``items``, in precedence order) and the skill
        files that were skipped, each with its path and reason (``problems``)."""
        return await self._http.model(ops.LIST_SKILLS, SkillList, self._p())

    async def hooks(self) -> HookList:
        """The hooks in effect for this session's agents (the operator's, then its trusted
        project's), and a problem with its project's hooks file, if any."""
        return await self._http.model(ops.LIST_HOOKS, HookList, self._p())

    # ---------------------------------------------------------------- permissions

    async def permissions(self) -> list[PermissionRequest]:
        """The tool calls of this session's runs that wait for a decision, oldest first (each
        with ``expires_at``, when it is denied if nobody decides)."""
        return (await self._http.model(ops.LIST_PERMISSIONS, PermissionList, self._p())).items

    async def decide(
        self, request_id: str, behavior: PermissionBehavior | str, *, reason: str | None = None
    ) -> PermissionDecision:
        """Allow or deny a tool call waiting for permission (decided once; again: 409)."""
        body: dict[str, Any] = {"behavior": str(behavior)}
        if reason is not None:
            body["reason"] = reason
        return await self._http.model(
            ops.DECIDE_PERMISSION, PermissionDecision, self._p(request_id=request_id), json=body
        )

    async def allow(self, request_id: str) -> PermissionDecision:
        """Allow a waiting tool call."""
        return await self.decide(request_id, PermissionBehavior.ALLOW)

    async def deny(self, request_id: str, reason: str | None = None) -> PermissionDecision:
        """Deny a waiting tool call (the model is told ``reason``)."""
        return await self.decide(request_id, PermissionBehavior.DENY, reason=reason)

    # ---------------------------------------------------------------- files and artifacts

    async def files(self, area: Area = "all", *, limit: int = 1000) -> list[FileEntry]:
        """Regular files below ``input/``, ``scratchpad/`` and ``output/`` (or one ``area``)."""
        query = {"area": area, "limit": limit}
        return (await self._http.model(ops.LIST_FILES, FileList, self._p(), query=query)).items

    async def upload(self, filename: str, data: bytes | Path) -> UploadedFile:
        """Put ``data`` (bytes, or a local file's content) at ``input/<filename>``."""
        body = await asyncio.to_thread(data.read_bytes) if isinstance(data, Path) else data
        return await self._http.model(
            ops.UPLOAD_FILE,
            UploadedFile,
            self._p(filename=filename),
            content=body,
            headers={"Content-Type": "application/octet-stream"},
        )

    async def upload_files(self, files: Mapping[str, bytes | Path]) -> list[UploadedFile]:
        """Put several files into ``input/`` in one request (a multipart form): each name maps
        to its bytes or a local file; the answer lists where each landed, in order."""
        parts = [
            ("file", (name, await asyncio.to_thread(d.read_bytes) if isinstance(d, Path) else d))
            for name, d in files.items()
        ]
        return (
            await self._http.model(ops.UPLOAD_FILES, UploadedFiles, self._p(), files=parts)
        ).items

    async def download(self, path: str) -> bytes:
        """A workspace file's bytes: ``path`` is ``output/…`` or ``input/…``."""
        area, _, rest = path.partition("/")
        response = await self._http.request(ops.DOWNLOAD_FILE, self._p(area=area, path=rest))
        return response.content

    async def artifacts(self) -> list[ArtifactRef]:
        """The session's artifacts, oldest first."""
        return (await self._http.model(ops.LIST_ARTIFACTS, ArtifactList, self._p())).items

    async def artifact(self, artifact_id: str) -> ArtifactRef:
        """One artifact's metadata and provenance."""
        return await self._http.model(
            ops.GET_ARTIFACT, ArtifactRef, self._p(artifact_id=artifact_id)
        )

    async def artifact_content(self, artifact_id: str) -> bytes:
        """An artifact's bytes."""
        params = self._p(artifact_id=artifact_id)
        return (await self._http.request(ops.ARTIFACT_CONTENT, params)).content

    # ---------------------------------------------------------------- tasks

    async def task_lists(self) -> TaskListsView:
        """The session's task lists (a corrupt one is listed as unavailable)."""
        return await self._http.model(ops.LIST_TASK_LISTS, TaskListsView, self._p())

    async def task_list(self, list_name: str) -> TaskDagView:
        """One task DAG with its ready and blocked tasks."""
        return await self._http.model(ops.GET_TASK_LIST, TaskDagView, self._p(list_name=list_name))
