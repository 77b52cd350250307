"""What the SSE relay forwards of a stored event: checked, not rebuilt, and always one line."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from agent_core.runqueue.events import _EventHead, forwardable
from agent_core.types.enums import RunStatus
from agent_core.types.runtime import RunFinished, RunTextDelta, RuntimeEvent

SID = "sess_20260101_000000_abcd1234"
RID = "run_0123456789abcdef"


def test_every_event_type_is_known_to_the_relay() -> None:
    members = get_args(get_args(RuntimeEvent)[0])
    kinds = {m.model_fields["type"].default for m in members}
    assert set(get_args(_EventHead.model_fields["type"].annotation)) == kinds


def test_a_stored_event_is_forwarded_byte_for_byte() -> None:
    event = RunTextDelta(run_id=RID, session_id=SID, turn=1, text="héllo € 日本")
    raw = event.model_dump_json().encode()
    kind, out = forwardable(raw)
    assert (kind, out) == ("text_delta", raw)
    end = RunFinished(run_id=RID, session_id=SID, status=RunStatus.COMPLETED)
    assert forwardable(end.model_dump_json().encode())[0] == "run_finished"


@pytest.mark.parametrize(
    "text", ["\u2028", "\u2029", "\x85", "a\nb", "a\rb", "\u2028\u2029\x85\r\n", "plain"]
)
def test_json_with_line_breaks_is_rebuilt_on_one_line(text: str) -> None:
    event = RunTextDelta(run_id=RID, session_id=SID, turn=0, text=text)
    # As stored by the writer, and as JSON pretty-printed by someone else: both stay one line.
    for raw in (
        event.model_dump_json().encode(),
        json.dumps(event.model_dump(mode="json"), indent=2).encode(),
    ):
        kind, out = forwardable(raw)
        assert kind == "text_delta"
        line = out.decode()
        assert line.splitlines() == [line]  # splitlines also splits on U+2028 and friends
        assert json.loads(line)["text"] == text


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        b'{"type": "no_such_event", "run_id": "run_0123456789abcdef", "session_id": "x"}',
        b'{"type": "text_delta", "run_id": "run_0123456789abcdef", "session_id": "no"}',
        b'{"type": "text_delta"}',
    ],
)
def test_what_is_not_an_event_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        forwardable(raw)
