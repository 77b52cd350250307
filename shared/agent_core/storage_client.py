"""Talking to the storage-writer: commands with retry under the same ids, and queries.

A command's ids (``command_id`` and the entity ids) are allocated here, by the sender, once. When
no receipt arrives in time the *same* command is sent again: the writer applies a command at most
once and answers a repeat with the first receipt (``duplicate=True``), so a retry can never write
twice. No SQL here; everything goes over the bus.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence
from typing import Any, Literal, TypeVar, cast

from agent_core.bus import BusNames, RpcClient
from agent_core.bus.contracts._replies import TypedQuery, refused_error
from agent_core.bus.contracts.assistants import AccountCommand
from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.bus.contracts.storage import (
    AppendEvent,
    AppendNode,
    CommandReceipt,
    CreateSession,
    QueryReply,
    RunFence,
    StorageCommand,
    StorageQuery,
)
from agent_core.errors import BusTimeoutError
from agent_core.ids import new_id
from agent_core.types.enums import AgentType
from agent_core.types.runtime import Node, TimelineEvent

__all__ = ["StorageClient", "raise_for_receipt"]

_BACKOFF_MAX_S = 2.0

log = logging.getLogger("soong.storage_client")

R = TypeVar("R")


def raise_for_receipt(receipt: CommandReceipt) -> CommandReceipt:
    """Return ``receipt`` if the command was applied, else raise its typed :class:`StorageError`."""
    if receipt.ok:
        return receipt
    raise refused_error(receipt)


class StorageClient:
    """Sends storage commands and queries through one process's :class:`RpcClient`."""

    def __init__(
        self,
        rpc: RpcClient,
        names: BusNames,
        *,
        timeout_s: float = 10.0,
        attempts: int | None = 5,
        backoff_s: float = 0.2,
    ) -> None:
        """``attempts=None``: retry until the writer answers (a run-worker: an outage of the
        writer delays the work it acknowledged, never fails it)."""
        if attempts is not None and attempts < 1:
            raise ValueError("attempts must be >= 1")
        self._rpc = rpc
        self._names = names
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.backoff_s = backoff_s

    @property
    def gives_up_after_s(self) -> float | None:
        """How long :meth:`send` waits in all before it raises (``None``: it never gives up)."""
        if self.attempts is None:
            return None
        pauses = sum(min(self.backoff_s * i, _BACKOFF_MAX_S) for i in range(1, self.attempts))
        return self.attempts * self.timeout_s + pauses

    @staticmethod
    def new_command_id() -> str:
        """A fresh command id (allocate once per logical command, reuse it on retry)."""
        return new_id("cmd")

    async def send(self, command: StorageCommand) -> CommandReceipt:
        """Send ``command`` until a receipt arrives; timeouts retry the very same command.

        Raises :class:`BusTimeoutError` after ``attempts`` timeouts. A refused command is a
        receipt with ``ok=False`` (see :func:`raise_for_receipt`), never retried here; except,
        without a budget (``attempts=None``), ``storage_full``: sent again until space returns.
        """
        # An account's commands (assistants) concern no session: they take the default route.
        session_id = None if isinstance(command, AccountCommand) else command.session_id
        stream = self._names.storage_commands(session_id)
        for attempt in itertools.count(1):
            try:
                receipt = await self._rpc.request(
                    command, stream=stream, reply=CommandReceipt, timeout_s=self.timeout_s
                )
            except BusTimeoutError as exc:
                await self._retry_pause(attempt, command.type, exc)
                continue
            full = receipt.error is not None and receipt.error.code is RefusalCode.STORAGE_FULL
            if not full or self.attempts is not None:
                return receipt
            # No budget (a run-worker): nothing was written; wait for space like for the writer.
            if attempt == 1 or attempt % 10 == 0:
                log.warning("the database's disk is full; %s waits for space", command.type)
            await asyncio.sleep(_BACKOFF_MAX_S)
        raise AssertionError("unreachable")

    async def _retry_pause(self, attempt: int, what: str, exc: BusTimeoutError) -> None:
        """Raise ``exc`` after the last attempt; else wait before sending again."""
        if self.attempts is not None and attempt >= self.attempts:
            raise exc
        if attempt >= 3:
            log.warning("the storage-writer has not answered %s %d times; retrying", what, attempt)
        await asyncio.sleep(min(self.backoff_s * attempt, _BACKOFF_MAX_S))

    async def query(self, query: StorageQuery) -> QueryReply:
        """Run one query (idempotent: retried on timeout like a command)."""
        for attempt in itertools.count(1):
            try:
                return await self._rpc.request(
                    query,
                    stream=self._names.storage_queries,
                    reply=QueryReply,
                    timeout_s=self.timeout_s,
                )
            except BusTimeoutError as exc:
                await self._retry_pause(attempt, query.type, exc)
        raise AssertionError("unreachable")

    async def read(self, query: TypedQuery[R]) -> R:
        """Run one query and return its data typed by the query (``<Query>.reply_of``); a failed
        read raises :class:`StorageError`."""
        return query.reply_of(await self.query(cast("StorageQuery", query)))

    # -- typed shortcuts -----------------------------------------------------------------------

    async def create_session(
        self,
        session_id: str,
        *,
        account_id: str,
        cwd: str,
        root_agent_id: str,
        root_agent_type: Literal[AgentType.MAIN, AgentType.ORCHESTRATOR] = AgentType.MAIN,
        metadata: dict[str, Any] | None = None,
        command_id: str | None = None,
    ) -> CommandReceipt:
        """Create a session with its tables, root agent and ``session_created`` event
        (``root_agent_type`` ``orchestrator``: a session in orchestrator mode)."""
        return await self.send(
            CreateSession(
                command_id=command_id or self.new_command_id(),
                session_id=session_id,
                account_id=account_id,
                cwd=cwd,
                root_agent_id=root_agent_id,
                root_agent_type=root_agent_type,
                metadata=metadata or {},
            )
        )

    async def append_node(
        self,
        session_id: str,
        node: Node,
        event: TimelineEvent,
        *,
        fence: RunFence | None = None,
        set_active: bool = True,
        command_id: str | None = None,
        events: Sequence[TimelineEvent] = (),
    ) -> CommandReceipt:
        """Append a node and its event atomically (with ``events``, more events of the node);
        ``result`` holds ``node_seq``, ``seq``."""
        return await self.send(
            AppendNode(
                command_id=command_id or self.new_command_id(),
                session_id=session_id,
                node=node,
                event=event,
                fence=fence,
                set_active=set_active,
                events=list(events),
            )
        )

    async def append_event(
        self,
        session_id: str,
        event: TimelineEvent,
        *,
        fence: RunFence | None = None,
        command_id: str | None = None,
    ) -> CommandReceipt:
        """Append a lifecycle event that has no node; ``result`` holds ``seq`` and ``run_seq``."""
        return await self.send(
            AppendEvent(
                command_id=command_id or self.new_command_id(),
                session_id=session_id,
                event=event,
                fence=fence,
            )
        )
