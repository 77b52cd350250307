"""RESP on the wire: commands packed as redis-py packs them, and error replies raised as
redis-py raises them. Shared by the lean client (:mod:`agent_core.bus.resp`), its subscriber and
the cluster's calls, and by code that builds commands for them (``xadd``)."""

from __future__ import annotations

from collections.abc import Sequence

import hiredis
from redis._parsers.base import BaseParser
from redis.exceptions import ResponseError

__all__ = ["Arg", "Command", "bulk", "encode", "error_from", "xadd"]

Arg = str | bytes | int | float
Command = Sequence[Arg]


def error_from(reply: ResponseError) -> ResponseError:
    """The exception redis-py raises for this error reply (NOSCRIPT, WRONGPASS, … subclasses)."""
    parsed: ResponseError = BaseParser.parse_error(str(reply))  # type: ignore[no-untyped-call]
    return parsed


def bulk(data: bytes) -> bytes:
    """One argument as a RESP bulk string (for a caller that packs a command in parts)."""
    return b"$%d\r\n%s\r\n" % (len(data), data)


def encode(args: Command) -> bytes:
    """One command as a RESP array of bulk strings, byte for byte as redis-py packs it.

    Packed by hiredis (``hiredis.pack_command``, C: ~0.9 µs for a 12-argument ``XADD`` against
    2.7 in Python); it takes ``str`` (UTF-8), ``bytes``, ``int`` and ``float`` (by ``repr``, as
    redis-py) and raises ``TypeError`` for anything else, booleans included, as redis-py
    refuses them."""
    packed: bytes = hiredis.pack_command(
        args if type(args) is tuple else tuple(args)  # type: ignore[arg-type]
    )  # (its stub types the argument as a one-item tuple; any length is taken)
    return packed


def xadd(
    stream: str,
    fields: dict[str, str] | dict[str, bytes] | dict[str, str | bytes],
    *,
    maxlen: int | None,
) -> list[Arg]:
    """``XADD stream [MAXLEN ~ n] * field value …`` with the arguments redis-py's ``xadd(…,
    approximate=True)`` sends, in the same order."""
    args: list[Arg] = ["XADD", stream]
    if maxlen is not None:
        args += [b"MAXLEN", b"~", str(maxlen)]
    args.append("*")
    for key, value in fields.items():
        args += [key, value]
    return args
