"""The SSE decoder: frames come out whole and once, however the bytes are cut."""

from __future__ import annotations

import json

import pytest

from agent_core.types.runtime import RunTextDelta
from soong_agent import ProtocolError
from soong_agent._sse import Frame, SseDecoder, decode_event

STREAM = (
    b"retry: 1000\n\n"
    b'id: 1-0\nevent: text_delta\ndata: {"a": 1}\n\n'
    b": keep-alive\n\n"
    b"id: 2-0\r\nevent: usage\r\ndata: line one\r\ndata: line two\r\n\r\n"
    b'id: db-3\revent: timeline\rdata:{"b": 2}\r\r'
    b'id: 4-0\nevent: run_finished\ndata: {"c": 3}\n\n'
)
EXPECTED = [
    Frame("1-0", "text_delta", b'{"a": 1}'),
    Frame("2-0", "usage", b"line one\nline two"),
    Frame("db-3", "timeline", b'{"b": 2}'),
    Frame("4-0", "run_finished", b'{"c": 3}'),
]


def test_whole_stream() -> None:
    assert SseDecoder().feed(STREAM) == EXPECTED


def test_every_cut_point_gives_the_same_frames() -> None:
    for cut in range(1, len(STREAM)):
        decoder = SseDecoder()
        assert decoder.feed(STREAM[:cut]) + decoder.feed(STREAM[cut:]) == EXPECTED, cut


def test_byte_by_byte_and_an_unfinished_frame_is_held_back() -> None:
    decoder = SseDecoder()
    frames = [f for i in range(len(STREAM)) for f in decoder.feed(STREAM[i : i + 1])]
    assert frames == EXPECTED
    assert decoder.feed(b"id: 5-0\nevent: x\ndata: {}") == []  # no blank line yet


def test_events_are_the_servers_types_and_strangers_are_refused() -> None:
    delta = {
        "type": "text_delta",
        "run_id": "run_0123456789abcdef",
        "session_id": "sess_20260101_120000_0123456789abcdef",
        "turn": 1,
        "text": "hi",
    }
    event = decode_event(Frame("1-0", "text_delta", json.dumps(delta).encode()))
    assert isinstance(event, RunTextDelta) and event.text == "hi"
    with pytest.raises(ProtocolError):
        decode_event(Frame("1-0", "new_thing", b'{"type": "new_thing"}'))
    with pytest.raises(ProtocolError):
        decode_event(Frame("db-1", "timeline", b"{}"))
