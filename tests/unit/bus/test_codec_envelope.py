"""Entries written by another FastStream application (its binary envelope) are still read, though
no service imports FastStream: the envelope's first bytes are a constant of ours."""

from __future__ import annotations

from faststream.redis.parser.binary import BinaryMessageFormatV1

from agent_core.bus.codec import FASTSTREAM_ENVELOPE, decode_fields


def test_the_envelope_marker_is_faststreams_own() -> None:
    assert FASTSTREAM_ENVELOPE == BinaryMessageFormatV1.IDENTITY_HEADER


async def test_an_enveloped_entry_decodes_to_its_body_and_headers() -> None:
    data = await BinaryMessageFormatV1.encode(
        message=b'{"type": "nudge"}', reply_to=None, headers={"x-trace": "t1"}, correlation_id="c"
    )
    body, headers = decode_fields({b"__data__": data})
    assert body == b'{"type": "nudge"}'
    assert headers["x-trace"] == "t1"
