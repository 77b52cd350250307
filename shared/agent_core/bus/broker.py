"""A FastStream broker, never started by a service.

The services read and write the bus through redis-py and the lean client (``connection``,
``resp``, ``consumer``); FastStream is kept for what it does well and no service process needs
at run time: describing the bus as an AsyncAPI document (``soong-agent asyncapi``), and, in
tests, publishing as another FastStream application would (its binary envelope, which the
consumers still read). Importing this module imports FastStream.
"""

from __future__ import annotations

import logging

from faststream.redis import RedisBroker

__all__ = ["make_broker"]


# FastStream logs an INFO line per message; a WARNING-level logger keeps its warnings.
_FASTSTREAM_LOG = logging.getLogger("soong.faststream")
_FASTSTREAM_LOG.setLevel(logging.WARNING)


def make_broker(url: str) -> RedisBroker:
    """A FastStream Redis broker. No I/O happens here: ``await broker.connect()`` connects."""
    return RedisBroker(url, logger=_FASTSTREAM_LOG)
