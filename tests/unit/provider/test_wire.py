"""The bytes-level SSE decoder, NDJSON line splitter and JSON parse the adapters read with."""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec
import pytest

from agent_core.provider.wire import MAX_LINE_BYTES, LineSplitter, SSEDecoder, loads, struct_loads

Event = tuple[bytes | None, bytes]


def decode(*chunks: bytes) -> list[Event]:
    decoder = SSEDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def splits(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` cut at random points (empty pieces included)."""
    cuts = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(0, 12)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


STREAM = (
    ": a comment\n"
    'event: message_start\ndata: {"a": 1}\n\n'
    "event: ping\r\ndata: {}\r\n\r\n"
    "id: 7\nretry: 100\ndata: first\ndata: second\n\n"
    "data:no-space\rdata:  two spaces\r\r"
    "event: only-a-name\n\n"
    'data: {"text": "日本語 ✓"}\n\n'
    "data\n\n"
    "data: [DONE]\n\n"
).encode()

EXPECTED: list[Event] = [
    (b"message_start", b'{"a": 1}'),
    (b"ping", b"{}"),
    (None, b"first\nsecond"),
    (None, b"no-space\n two spaces"),
    (None, '{"text": "日本語 ✓"}'.encode()),
    (None, b""),
    (None, b"[DONE]"),
]


def test_sse_fields_line_endings_and_dispatch() -> None:
    assert decode(STREAM) == EXPECTED


def test_sse_every_single_cut_gives_the_same_events() -> None:
    for i in range(len(STREAM) + 1):
        assert decode(STREAM[:i], STREAM[i:]) == EXPECTED, f"cut at byte {i}"


def test_sse_random_cuts_give_the_same_events() -> None:
    rng = random.Random(4)
    for _ in range(500):
        assert decode(*splits(STREAM, rng)) == EXPECTED


def test_sse_crlf_split_between_chunks_is_one_line_ending() -> None:
    # "\r" ends one chunk and "\n" starts the next: one line ending, not a blank line between.
    assert decode(b"data: a\r", b"\ndata: b\r\n\r\n") == [(None, b"a\nb")]
    assert decode(b"data: a\r", b"", b"\ndata: b\r\n\r\n") == [(None, b"a\nb")]


def test_sse_unfinished_event_at_the_end_is_not_dispatched() -> None:
    assert decode(b"data: 1\n\ndata: 2\n") == [(None, b"1")]


def test_sse_refuses_an_endless_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: " + b"x" * (MAX_LINE_BYTES - 6)) == []
    with pytest.raises(ValueError, match="longer than"):
        decoder.feed(b"x")


def test_lines_split_anywhere_and_crlf() -> None:
    data = '{"a": 1}\r\n\n{"b": "日本"}\n{"c": 3}'.encode()
    expected = [b'{"a": 1}', b"", '{"b": "日本"}'.encode(), b'{"c": 3}']
    rng = random.Random(5)
    for _ in range(300):
        splitter = LineSplitter()
        lines = [line for chunk in splits(data, rng) for line in splitter.feed(chunk)]
        assert lines + splitter.flush() == expected


def test_lines_flush_is_empty_after_a_final_newline() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"x\n") == [b"x"]
    assert splitter.flush() == []


def test_lines_refuse_an_endless_line() -> None:
    with pytest.raises(ValueError, match="longer than"):
        LineSplitter().feed(b"x" * (MAX_LINE_BYTES + 1))


@pytest.mark.parametrize(
    "payload",
    [
        '{"a": [1, 2.5, null, true]}',
        ' {"a": 1} ',
        '"日本"',
        "[]",
        "0",
        '{"a": "\\u00e9"}\n',
        # refused by orjson, accepted by json: the fallback keeps json's language
        '{"a": NaN, "b": -Infinity}',
        '"\\ud800"',
    ],
)
def test_loads_accepts_what_json_loads_accepts(payload: str) -> None:
    # repr: NaN is not equal to itself
    assert repr(loads(payload.encode())) == repr(json.loads(payload))


def test_loads_reads_an_integer_beyond_64_bits_as_a_float() -> None:
    """orjson's one difference that no fallback catches (no provider chunk carries one)."""
    assert loads(b"[123456789012345678901234567890]") == [1.2345678901234568e29]
    assert loads(b"[9223372036854775807]") == [9223372036854775807]


@pytest.mark.parametrize(
    "payload", [b'{"broken": ', b'{"a": 1} x', b"", b"  ", b"[DONE]", b'"\xff"', b"NaNx"]
)
def test_loads_refuses_what_json_loads_refuses(payload: bytes) -> None:
    with pytest.raises(ValueError):
        loads(payload)


class _Shape(msgspec.Struct):
    a: Any = None
    b: Any = "absent"
    items: list[int] | None = None


_parse_shape = struct_loads(_Shape)


@pytest.mark.parametrize(
    "payload",
    [
        '{"a": [1, 2.5, null, true], "b": "x", "items": [1, 2]}',
        ' {"a": 1} ',
        '{"a": {"nested": "日本"}, "unread": {"deep": [1, {"x": null}]}}',
        '{"a": "\\u00e9", "b": null}',
        '{"a": 123456789012345678901234567890}',
        # refused by msgspec, accepted by json: parsed by json, converted the same way
        '{"a": NaN, "b": -Infinity}',
        '{"a": "\\ud800"}',
    ],
)
def test_struct_loads_reads_what_json_reads_into_the_struct(payload: str) -> None:
    raw = json.loads(payload)
    got = _parse_shape(payload.encode())
    # repr: NaN is not equal to itself; fields not named are skipped, absent ones default
    assert repr((got.a, got.b, got.items)) == repr(
        (raw.get("a"), raw.get("b", "absent"), raw.get("items"))
    )


@pytest.mark.parametrize(
    "payload",
    [
        b'{"broken": ',
        b'{"a": 1} x',
        b"",
        b"[DONE]",
        b'"\xff"',
        b"NaNx",
        b"[1, 2]",  # JSON, but not an object
        b'{"items": "x"}',  # a typed field of another type
        b'{"items": [1, NaN]}',  # the same on the json path
    ],
)
def test_struct_loads_refuses_bad_json_and_wrong_shapes_as_value_errors(payload: bytes) -> None:
    with pytest.raises(ValueError):
        _parse_shape(payload)
