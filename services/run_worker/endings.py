"""How a run's end is written (one ``end_run`` command) and told (the stream's last events).

Every way a run ends comes here (``docs/architecture.md``, "Run lifecycle and endings"): the
executor's runs and child runs after :func:`agent_core.runtime.drive`, a run cancelled before it
was claimed, child runs ended from outside their loop. :func:`end_run` writes the end with the node
it ends on in one command and tells it once to the logs and metrics
(:func:`agent_core.observability.runs.run_ended`); :func:`announce` puts the node, a fatal
``error`` and ``run_finished`` on the run's stream.
"""

from __future__ import annotations

import dataclasses
import logging
import traceback
from typing import Any

from agent_core.bus.contracts.refusals import FENCED, RefusalCode
from agent_core.bus.contracts.storage import EndRun, EndRunResult, GetRun, RunFence
from agent_core.errors import StorageError, redact
from agent_core.ids import new_id
from agent_core.observability.runs import run_ended
from agent_core.runqueue import QueuedRun, RunEventWriter, SessionQueue, cancel_queued_run
from agent_core.runtime import Ending, EventSink, Fenced
from agent_core.service import ServiceContext
from agent_core.storage_client import StorageClient
from agent_core.tools import Workspace
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.mappers import to_run_finished, to_run_state
from agent_core.types.runtime import (
    RunEnd,
    RunError,
    RunFinished,
    RunHandle,
    RunNodeCreated,
)
from agent_core.types.storage import RunRecord
from services.run_worker.adapters import StorageArtifactSink, node_drafts
from services.run_worker.reads import RunReads

__all__ = [
    "announce",
    "close_stream_of_terminal_run",
    "end_run",
    "end_unclaimed",
    "keep_traceback",
    "stored_end",
]

log = logging.getLogger("soong.run_worker")

# What a run ended before end reasons were always written is read as.
_DEFAULT_REASON = {
    RunStatus.COMPLETED: EndReason.COMPLETED,
    RunStatus.CANCELLED: EndReason.ABORTED_STREAMING,
}


async def end_run(
    storage: StorageClient,
    reads: RunReads,
    handle: RunHandle,
    ending: Ending,
    *,
    fence: RunFence | None,
    set_active: bool = True,
    debug: Workspace | None = None,
    model: str | None = None,
) -> Ending:
    """Write ``ending`` as the run's end (``end_run``); return the end as recorded — the stored
    one when the run had ended already (its end was written before, by whoever ended it).

    ``fence`` is the attempt's (``None`` only for a run that no attempt claimed). ``debug``: the
    session's workspace in debug mode, where the traceback of an unexpected exception that ended
    the run is kept (:func:`keep_traceback`). Raises :class:`Fenced` when a newer attempt owns
    the run, :class:`StorageError` when the end could not be written (the run stays in flight: a
    takeover ends it). ``model``: the model the run's usage is counted under in the usage totals.
    """
    if ending.exception is not None:
        exc = ending.exception
        log.error(
            "run %s: unexpected %s: %s", handle.run_id, type(exc).__name__, exc, exc_info=exc
        )  # (redacted, and with its traceback in debug mode only: see service.logs)
        if debug is not None:
            ending = await keep_traceback(storage, handle, debug, ending)
    receipt = await storage.send(_command(handle, ending, fence, set_active, model))
    if not receipt.ok and ending.node is not None and _code(receipt) not in _NOT_THE_NODE:
        # The node could not be written (its parent is gone, …): the end goes without it.
        log.warning("run %s: its last node was refused (%s)", handle.run_id, _code(receipt))
        end = ending.end.model_copy(update={"last_node_id": ending.node.parent_id})
        ending = dataclasses.replace(ending, end=end, node=None)
        receipt = await storage.send(_command(handle, ending, fence, set_active, model))
    if receipt.ok:
        node, written = ending.node, EndRunResult.of(receipt).node
        if node is not None:
            seq = None if written is None else written.node_seq
            ending = dataclasses.replace(ending, node=node.model_copy(update={"node_seq": seq}))
        run_ended(handle, ending.end)  # the one log line and metrics of the run's end
        return ending
    code = _code(receipt)
    if code in FENCED:
        raise Fenced(f"a newer attempt owns run {handle.run_id}")
    stored = await _stored(reads, handle)
    if stored is None:
        raise StorageError(code, f"the end of run {handle.run_id} was refused")
    log.info("run %s had ended already (%s)", handle.run_id, stored.status.value)
    return Ending(stored, text=ending.text if stored.status is ending.end.status else "")


# Refusals that are the run's, not its last node's: retrying without the node changes nothing.
_NOT_THE_NODE = FENCED | {
    RefusalCode.RUN_ENDED,
    RefusalCode.FENCE_REQUIRED,
    RefusalCode.RUN_NOT_FOUND,
}


def _code(receipt: Any) -> str:
    return str(receipt.error.code) if receipt.error else "refused"


def _command(
    handle: RunHandle,
    ending: Ending,
    fence: RunFence | None,
    set_active: bool,
    model: str | None = None,
) -> EndRun:
    node = event = None
    if ending.node is not None:
        node, event = node_drafts(ending.node)
    return EndRun(
        command_id=new_id("cmd"),
        session_id=handle.session_id,
        run_id=handle.run_id,
        fence=fence,
        end=ending.end,
        event_id=new_id("evt"),
        node=node,
        node_event=event,
        set_active=set_active,
        withdraw=ending.withdraw,
        model=model,
    )


async def keep_traceback(
    storage: StorageClient, handle: RunHandle, workspace: Workspace, ending: Ending
) -> Ending:
    """Debug mode: the traceback of the exception that ended the run, redacted, as an artifact of
    the session (``scratchpad/debug/``); the end's error names it (``traceback_artifact_id``),
    and so do its ``run_error`` and terminal events. Never raises: debugging aids never stop an
    end."""
    end, exc = ending.end, ending.exception
    if exc is None or end.error is None:
        return ending
    name = f"traceback-{handle.run_id}-{handle.attempt}.txt"
    text = redact("".join(traceback.format_exception(exc)))
    try:
        workspace.ensure()  # a run can fail before its workspace was ever needed
        sink = StorageArtifactSink(storage, handle, workspace)
        artifact_id = await sink.save_text(("scratchpad", "debug", name), text, summary="traceback")
    except Exception as failure:
        log.warning("run %s: traceback not kept: %s", handle.run_id, type(failure).__name__)
        return ending
    if artifact_id is None:
        return ending
    details = {**end.error.details, "traceback_artifact_id": artifact_id}
    error = end.error.model_copy(update={"details": details})
    return dataclasses.replace(ending, end=end.model_copy(update={"error": error}))


def announce(events: EventSink, handle: RunHandle, ending: Ending) -> None:
    """The run's end on its stream: the node it ended on, a fatal ``error`` when it failed,
    then ``run_finished`` (its stream's last event)."""
    ids = {"run_id": handle.run_id, "session_id": handle.session_id, "agent_id": handle.agent_id}
    if ending.node is not None and ending.node.node_seq is not None:
        events.emit(RunNodeCreated(**ids, node=ending.node))
    end = ending.end
    if end.error is not None and end.status is RunStatus.FAILED:
        events.emit(RunError(**ids, error=end.error, fatal=True))
    events.emit(RunFinished.of(handle, end))


def stored_end(record: RunRecord) -> RunEnd | None:
    """The end a run record holds, if the run has ended."""
    state = to_run_state(record)
    if not state.is_terminal:
        return None
    return RunEnd(
        status=state.status,
        end_reason=state.end_reason or _DEFAULT_REASON.get(state.status, EndReason.FAILED),
        turns=state.turn,
        usage=state.usage,
        error=state.error,
        last_node_id=state.last_node_id,
    )


async def _stored(reads: RunReads, handle: RunHandle) -> RunEnd | None:
    record = await reads.read(GetRun(run_id=handle.run_id, session_id=handle.session_id))
    return None if record is None else stored_end(record)


async def close_stream_of_terminal_run(
    ctx: ServiceContext, reads: RunReads, session_id: str, run_id: str
) -> None:
    """A worker can die after the run's end was written and before its ``run_finished`` event:
    the next holder finds the run terminal and writes the missing event from the record, so
    that every stream ends and no SSE client waits forever."""
    record = await reads.read(GetRun(run_id=run_id, session_id=session_id))
    if record is None or stored_end(record) is None:
        return
    events = RunEventWriter(ctx.bus, ctx.names, session_id, run_id)
    if await events.last_type() == "run_finished":
        return
    events.start()
    events.emit(to_run_finished(to_run_state(record)))
    await events.close()


async def end_unclaimed(
    ctx: ServiceContext,
    storage: StorageClient,
    queue: SessionQueue,
    reads: RunReads,
    run: QueuedRun,
) -> None:
    """End a run cancelled while queued, before any attempt claimed it (unfenced: it never ran,
    its message never became a node). When the writer refuses (the run started or ended
    meanwhile) the run is terminal already: its stream is closed if its last holder did not."""
    if not await cancel_queued_run(
        storage, queue, session_id=run.session_id, run_id=run.run_id, agent_id=run.agent_id
    ):
        await close_stream_of_terminal_run(ctx, reads, run.session_id, run.run_id)
