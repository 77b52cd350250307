"""Every command's result model and every query's reply type validate what the writer sends.

One scenario applies every member of ``StorageCommand`` (and again, for the results repeats get
back from the rows or from ``command_receipts``) and asks every member of ``StorageQuery``; a
command or query added without its typed result or reply fails here.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agent_core.bus.contracts._replies import wire
from agent_core.bus.contracts.assistants import (
    ArchiveAssistant,
    CreateAssistant,
    GetAssistant,
    ListAssistants,
    ListAssistantVersions,
    UpdateAssistant,
)
from agent_core.bus.contracts.refusals import RefusalCode
from agent_core.bus.contracts.storage import (
    AppendEvent,
    AppendNodeResult,
    ClaimRun,
    ClaimRunResult,
    CommandReceipt,
    CreateAgent,
    CreateArtifact,
    CreateRunResult,
    DeleteSession,
    EndRunResult,
    GetActivePath,
    GetArtifact,
    GetNode,
    GetRun,
    GetSession,
    GetSessionUsage,
    GetSessionWithUsage,
    GetTree,
    GetUsage,
    ListAgents,
    ListArtifacts,
    ListAuditEvents,
    ListEvents,
    ListNodes,
    ListRuns,
    ListSessions,
    ListStrandedRuns,
    PlaceMessage,
    RunFence,
    SearchSessions,
    StorageCommand,
    StorageQuery,
    SwitchActiveNode,
    UpdateAgent,
    UpdateRun,
    UpdateSession,
)
from agent_core.errors import StorageError
from agent_core.ids import new_id
from agent_core.types.api import AssistantDefinition
from agent_core.types.enums import AgentStatus, AgentType, EventType, Role, RunStatus
from agent_core.types.protocol import TextBlock
from agent_core.types.runtime import SESSION_CONFIG_KEY, ArtifactRef, Node, TimelineEvent
from services.storage_writer.queries import QueryEngine
from services.storage_writer.writer import Writer
from tests.unit.storage_writer.factories import append_node, create_run, create_session, end_run


def _members(union: Any) -> set[str]:
    members = typing.get_args(typing.get_args(union)[0])
    return {m.model_fields["type"].default for m in members}


def _every_command() -> tuple[list[StorageCommand], dict[str, Any]]:
    """One command of every type, to apply in order; and ids the queries need."""
    s = create_session().model_copy(update={"metadata": {SESSION_CONFIG_KEY: {"max_turns": 3}}})
    first = append_node(s)
    run = create_run(s).model_copy(update={"start_node_id": new_id("node")})
    message = Node(
        node_id=run.start_node_id or "",
        agent_id=s.root_agent_id,
        run_id=run.run_id,
        role=Role.USER,
        content=[TextBlock(text="hi")],
    )
    place = PlaceMessage(
        node=message,
        event=TimelineEvent(
            event_id=new_id("evt"), event_type=EventType.NODE_CREATED, run_id=run.run_id
        ),
    )
    fence = RunFence(run_id=run.run_id, attempt=1)
    sid, cmd = s.session_id, lambda: new_id("cmd")
    child = new_id("agent")
    assistant = CreateAssistant(
        command_id=cmd(),
        account_id="acct_a",
        assistant_id=new_id("asst"),
        name="typed",
        definition=AssistantDefinition(instructions="v1"),
    )
    gone = create_session()
    commands: list[StorageCommand] = [
        s,
        first,
        UpdateSession(command_id=cmd(), session_id=sid, metadata={"k": 1} | s.metadata),
        SwitchActiveNode(command_id=cmd(), session_id=sid, node_id=first.node.node_id),
        CreateAgent(
            command_id=cmd(),
            session_id=sid,
            agent_id=child,
            agent_type=AgentType.SUB,
            parent_agent_id=s.root_agent_id,
        ),
        UpdateAgent(command_id=cmd(), session_id=sid, agent_id=child, status=AgentStatus.RUNNING),
        run,
        ClaimRun(command_id=cmd(), session_id=sid, fence=fence, place=place),
        UpdateRun(command_id=cmd(), session_id=sid, run_id=run.run_id, fence=fence, turn_count=1),
        AppendEvent(
            command_id=cmd(),
            session_id=sid,
            fence=fence,
            event=TimelineEvent(
                event_id=new_id("evt"), event_type=EventType.RUN_STATUS_CHANGED, run_id=run.run_id
            ),
        ),
        CreateArtifact(
            command_id=cmd(),
            session_id=sid,
            artifact=ArtifactRef(
                artifact_id=new_id("artifact"),
                session_id=sid,
                path="output/typed.txt",
                run_id=run.run_id,
            ),
            fence=fence,
        ),
        end_run(s, run.run_id, answer="done", parent_id=message.node_id),
        assistant,
        UpdateAssistant(
            command_id=cmd(),
            account_id="acct_a",
            assistant_id=assistant.assistant_id,
            definition=AssistantDefinition(instructions="v2"),
        ),
        ArchiveAssistant(
            command_id=cmd(), account_id="acct_a", assistant_id=assistant.assistant_id
        ),
        gone,
        DeleteSession(command_id=cmd(), session_id=gone.session_id, account_id="acct_a"),
    ]
    ids = {"session": s, "run": run, "node": first.node.node_id, "assistant": assistant}
    return commands, ids


def _typed(command: StorageCommand, receipt: CommandReceipt) -> BaseModel:
    assert receipt.ok, (command.type, receipt.error)
    result = command.result_type.of(receipt)
    # The typed result is the wire result, field for field (no key added, none lost).
    assert wire(result) == receipt.result, command.type
    return result


def test_every_command_result_validates_what_the_writer_sends(writer: Writer) -> None:
    commands, _ = _every_command()
    assert {c.type for c in commands} == _members(StorageCommand)
    receipts = [writer.apply_batch([c])[0] for c in commands]
    results = {c.type: _typed(c, r) for c, r in zip(commands, receipts, strict=True)}

    created = results["create_run"]
    assert isinstance(created, CreateRunResult) and created.session_config == {"max_turns": 3}
    assert created.agent_type is AgentType.MAIN and created.status is RunStatus.QUEUED
    claimed = results["claim_run"]
    assert isinstance(claimed, ClaimRunResult) and claimed.placed is not None
    assert claimed.place_error is None and "place_error" not in receipts[7].result
    ended = results["end_run"]
    assert isinstance(ended, EndRunResult) and ended.node is not None
    assert ended.node.node_seq == 3 and ended.event.run_seq is not None
    appended = results["append_node"]
    assert isinstance(appended, AppendNodeResult) and appended.node_seq == 1

    # Repeats get their first result back, from the rows or from command_receipts: typed alike.
    again = writer.apply_batch(commands)
    for command, first, repeat in zip(commands, receipts, again, strict=True):
        assert repeat.duplicate, command.type
        assert _typed(command, repeat) == _typed(command, first)


def test_a_claim_that_could_not_place_its_message_says_why(writer: Writer) -> None:
    s = create_session()
    run = create_run(s)
    writer.apply_batch([s, run])
    draft = Node(
        node_id=new_id("node"),
        parent_id=new_id("node"),  # not a node of the session
        agent_id=s.root_agent_id,
        role=Role.USER,
        content=[TextBlock(text="hi")],
    )
    event = TimelineEvent(event_id=new_id("evt"), event_type=EventType.NODE_CREATED)
    claim = ClaimRun(
        command_id=new_id("cmd"),
        session_id=s.session_id,
        fence=RunFence(run_id=run.run_id, attempt=1),
        place=PlaceMessage(node=draft, event=event),
    )
    [receipt] = writer.apply_batch([claim])
    result = ClaimRunResult.of(receipt)
    assert result.placed is None and result.place_error is RefusalCode.PARENT_NOT_FOUND
    assert wire(result) == receipt.result == {**receipt.result, "placed": None}


def test_a_refused_receipt_raises_its_refusal_and_a_stray_field_does_not_validate(
    writer: Writer,
) -> None:
    s = create_session()
    [receipt] = writer.apply_batch([create_run(s)])  # no such session
    with pytest.raises(StorageError) as refused:
        CreateRunResult.of(receipt)
    assert refused.value.code is RefusalCode.SESSION_NOT_FOUND

    applied = writer.apply_batch([s, create_run(s)])[1]
    stray = applied.model_copy(update={"result": {**applied.result, "surprise": 1}})
    with pytest.raises(ValidationError):
        CreateRunResult.of(stray)


def test_every_query_reply_validates_what_the_writer_sends(
    writer: Writer, engine: QueryEngine
) -> None:
    commands, ids = _every_command()
    writer.apply_batch(commands)
    writer.flush_index()  # the search index's pending rows, as the service does before a search
    s, run, assistant = ids["session"], ids["run"], ids["assistant"]
    sid = s.session_id
    [artifact] = [c for c in commands if isinstance(c, CreateArtifact)]
    queries: list[StorageQuery] = [
        GetSession(session_id=sid),
        ListSessions(account_id="acct_a"),
        SearchSessions(account_id="acct_a", q="hello"),
        ListAuditEvents(account_id="acct_a"),
        GetActivePath(session_id=sid),
        GetTree(session_id=sid),
        GetNode(session_id=sid, node_id=ids["node"]),
        ListNodes(session_id=sid),
        ListEvents(session_id=sid),
        GetRun(run_id=run.run_id, session_id=sid),
        ListRuns(session_id=sid),
        ListStrandedRuns(idle_s=1),
        ListAgents(session_id=sid),
        ListArtifacts(session_id=sid),
        GetArtifact(artifact_id=artifact.artifact.artifact_id),
        GetUsage(account_id="acct_a"),
        GetSessionUsage(session_id=sid),
        GetSessionWithUsage(session_id=sid),
        GetAssistant(account_id="acct_a", assistant_id=assistant.assistant_id),
        ListAssistants(account_id="acct_a", include_archived=True),
        ListAssistantVersions(account_id="acct_a", assistant_id=assistant.assistant_id),
    ]
    assert {q.type for q in queries} == _members(StorageQuery)
    for query in queries:
        data = query.reply_of(engine.answer(query))
        # Found, and typed (a model or a non-empty list of them); a stranded run must first be
        # idle for a second: test_stranded_runs.py reads one typed.
        assert data or isinstance(query, ListStrandedRuns), query.type
        for item in data if isinstance(data, list) else [data]:
            assert isinstance(item, BaseModel), query.type

    # Nothing visible is None, typed the same way; a failed read raises.
    other = GetSession(session_id=sid, account_id="acct_b")
    assert other.reply_of(engine.answer(other)) is None
    path = GetActivePath(session_id=sid).reply_of(engine.answer(GetActivePath(session_id=sid)))
    assert path is not None and [n.node_seq for n in path] == [1, 2, 3]
