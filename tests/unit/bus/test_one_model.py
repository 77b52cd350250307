"""One model per entity on the bus: an event or artifact sent to be written is the runtime model
with the writer's fields unset, and what senders sent before still reads the same."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from agent_core.bus.contracts.storage import STORAGE_COMMAND, AppendEvent, CreateArtifact
from agent_core.ids import new_id, new_session_id
from agent_core.types.enums import EventLevel, EventType
from agent_core.types.runtime import ArtifactRef, TimelineEvent


def test_an_event_sent_to_be_written_is_a_timeline_event_without_its_writer_fields() -> None:
    sid = new_session_id()
    event = TimelineEvent(event_id=new_id("evt"), event_type=EventType.RUN_STATUS_CHANGED)
    command = AppendEvent(command_id=new_id("cmd"), session_id=sid, event=event)
    decoded = STORAGE_COMMAND.validate_json(command.model_dump_json())
    assert isinstance(decoded, AppendEvent) and type(decoded.event) is TimelineEvent
    assert decoded.event == event
    assert (decoded.event.seq, decoded.event.run_seq) == (None, None)


def test_an_event_as_senders_wrote_it_before_still_reads() -> None:
    # The former draft's fields only: no seq, run_seq or created_at.
    sid, evt = new_session_id(), new_id("evt")
    wire = {
        "type": "append_event",
        "command_id": new_id("cmd"),
        "session_id": sid,
        "event": {
            "event_id": evt,
            "event_type": "tool_failed",
            "level": "warning",
            "payload": {"a": 1},
        },
    }
    decoded = STORAGE_COMMAND.validate_json(json.dumps(wire))
    assert isinstance(decoded, AppendEvent)
    assert (decoded.event.event_id, decoded.event.seq, decoded.event.level) == (
        evt,
        None,
        EventLevel.WARNING,
    )
    assert decoded.event.payload == {"a": 1}


def test_an_artifact_is_registered_as_an_artifact_ref_of_the_commands_session() -> None:
    sid = new_session_id()
    ref = ArtifactRef(
        artifact_id=new_id("artifact"), session_id=sid, path="out/a.csv", size_bytes=3
    )
    command = CreateArtifact(command_id=new_id("cmd"), session_id=sid, artifact=ref)
    decoded = STORAGE_COMMAND.validate_json(command.model_dump_json())
    assert isinstance(decoded, CreateArtifact) and decoded.artifact == ref
    with pytest.raises(ValidationError, match="session"):
        CreateArtifact(command_id=new_id("cmd"), session_id=new_session_id(), artifact=ref)
