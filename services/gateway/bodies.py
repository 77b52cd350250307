"""JSON bodies the rest of the system can hold, checked at the edge: a 422 instead of a 500 later.

Python's parser accepts what the storage, the bus and the providers cannot: an unpaired
surrogate (``"\\ud800"``) cannot be encoded as UTF-8, nesting past the interpreter's recursion
limit raises ``RecursionError``, an integer of thousands of digits does not fit SQLite's 64 bits
(and converting it is quadratic), ``1e999`` and ``NaN`` are not JSON values at all. Every
JSON request body is parsed once here with those refused; what passes is handed on unchanged.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.errors import error_response

__all__ = ["MAX_JSON_DEPTH", "JsonGuardMiddleware", "json_problem"]

MAX_JSON_DEPTH: Final = 32
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_MAX_NUMBER_CHARS: Final = 64
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_WITH_BODY: Final = frozenset({"POST", "PUT", "PATCH"})
_INLINE_BYTES: Final = 256 * 1024


class _Refused(ValueError):
    """A value the system cannot hold; the message says which."""


def _int(text: str) -> int:
    if len(text) > 20:
        raise _Refused("an integer outside the 64-bit range")
    value = int(text)
    if not _INT_MIN <= value <= _INT_MAX:
        raise _Refused("an integer outside the 64-bit range")
    return value


def _float(text: str) -> float:
    if len(text) > _MAX_NUMBER_CHARS:
        raise _Refused("a number literal longer than 64 characters")
    value = float(text)
    if not math.isfinite(value):
        raise _Refused("a number too large for a 64-bit float")
    return value


def _constant(text: str) -> Any:
    raise _Refused(f"{text} (not a JSON value)")


def _walk(value: Any) -> str | None:
    """What is wrong with a parsed document (depth, surrogates), iteratively; ``None``: fine."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return "a string with an unpaired surrogate (not valid Unicode)"
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                return f"nesting deeper than {MAX_JSON_DEPTH} levels"
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
    return None


def json_problem(raw: bytes) -> str | None:
    """Why ``raw`` is refused, or ``None`` (malformed JSON is left to the route's own 422)."""
    try:
        document = json.loads(raw, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except _Refused as exc:
        return str(exc)
    except RecursionError:
        return f"nesting deeper than {MAX_JSON_DEPTH} levels"
    except ValueError:
        return None
    return _walk(document)


def _is_json(scope: Scope) -> bool:
    if scope["method"] not in _WITH_BODY:
        return False
    kind = dict(scope.get("headers", [])).get(b"content-type", b"application/json")
    return b"json" in kind.lower()


class JsonGuardMiddleware:
    """Answers 422 ``invalid_json`` for a body :func:`json_problem` refuses (see module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:  # bounded: the body limit (outside this middleware) counts every byte
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, receive, send)  # a disconnect: let the app see it
                return
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body", False))
        raw = b"".join(chunks)
        problem = None
        if len(raw) > _INLINE_BYTES:  # megabytes of values: off the event loop's thread
            problem = await asyncio.to_thread(json_problem, raw)
        elif raw:
            problem = json_problem(raw)
        if problem is not None:
            response = error_response(
                422, "invalid_json", f"the JSON body holds {problem}", {"max_depth": MAX_JSON_DEPTH}
            )
            await response(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
