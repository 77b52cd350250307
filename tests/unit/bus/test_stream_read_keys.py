"""The keys of a stream read, read from the command (``agent_core.bus.connection``): what redis-py's
Cluster client would otherwise ask a node with ``COMMAND GETKEYS``."""

from __future__ import annotations

import pytest

from agent_core.bus.connection import stream_read_keys


@pytest.mark.parametrize(
    ("args", "keys"),
    [
        (("XREAD", "COUNT", 500, "BLOCK", 100, "STREAMS", "a", "0-0"), ("a",)),
        ((b"XREAD", b"STREAMS", b"a", b"b", b"0-0", b"1-1"), (b"a", b"b")),
        (("xreadgroup", "GROUP", "g", "c", "COUNT", 16, "STREAMS", "s", ">"), ("s",)),
        # a group and a consumer named like the keyword are skipped with GROUP's values
        (("XREADGROUP", "GROUP", "streams", "STREAMS", "NOACK", "STREAMS", "s", ">"), ("s",)),
        (("XREADGROUP", "GROUP", "g", "c", "BLOCK", 0, "STREAMS", "x", "y", ">", ">"), ("x", "y")),
    ],
)
def test_the_keys_of_a_stream_read_are_the_first_half_after_streams(
    args: tuple[object, ...], keys: tuple[object, ...]
) -> None:
    assert stream_read_keys(args) == keys


@pytest.mark.parametrize(
    "args",
    [
        ("GET", "a"),  # not a stream read: redis-py's parser decides
        ("XREAD", "STREAMS", "a"),  # an odd count: no reading of it is certain
        ("XREAD", "STREAMS"),
        ("XREAD", "COUNT", 1),  # no STREAMS at all
        ("XREAD", "SOMETHING", "STREAMS", "a", "0"),  # an option this does not know
        (),
    ],
)
def test_what_cannot_be_read_with_certainty_is_left_to_redis_py(args: tuple[object, ...]) -> None:
    assert stream_read_keys(args) is None
