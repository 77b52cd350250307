"""Assembling streamed tool calls: fragments by wire key, checked when the call closes.

Providers identify a streamed call differently (OpenAI ``tool_calls[].index``, Anthropic the
content block index, Ollama the position in the message); the assembler keys calls by that wire
key and numbers them 0, 1, … in the order they started, which is the ``index`` the normalized
events carry. A call the wire gives no id gets a fresh random one, so ids never repeat across
the turns of a session (the model sees every id again in its history).

Every started call is closed by exactly one event: ``tool_call_end`` when its arguments are a
JSON object, else ``tool_call_invalid`` — ``truncated`` when the response was cut by the output
limit inside this call (it is the last call, and the stop reason says so), ``invalid_arguments``
otherwise. A call whose arguments do not parse can wait for that verdict (:meth:`close` then
:meth:`settle`) when the wire closes calls before it says why the response stopped (Anthropic).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from agent_core.types.enums import InvalidToolCallReason
from agent_core.types.protocol import (
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallInvalidEvent,
    ToolCallStartEvent,
)

__all__ = ["ArgumentsError", "ToolCallAssembler", "new_call_id", "parse_arguments"]

ToolCallClose = ToolCallEndEvent | ToolCallInvalidEvent


class ArgumentsError(ValueError):
    """A tool call's arguments are not a JSON object; the message says why (never the text)."""


@dataclass
class _Pending:
    index: int
    id: str
    name: str
    fragments: list[str] = field(default_factory=list)


def new_call_id() -> str:
    """A fresh tool-call id, for calls the provider sent without one."""
    return f"call_{secrets.token_hex(8)}"


def parse_arguments(raw: str) -> dict[str, Any]:
    """A call's arguments as an object (empty text means ``{}``); ``ArgumentsError`` otherwise."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as err:
        raise ArgumentsError(f"not valid JSON: {err}") from err
    if not isinstance(value, dict):
        raise ArgumentsError(f"a JSON {type(value).__name__}, not an object")
    return value


class ToolCallAssembler:
    """Collects the argument fragments of one response's tool calls and closes each call once."""

    def __init__(self) -> None:
        self._open: dict[int | str, _Pending] = {}
        self._unparsed: list[tuple[_Pending, str]] = []  # closed, not a JSON object, no verdict
        self.count = 0

    def is_open(self, key: int | str) -> bool:
        """Whether the call with this wire key started and has not been closed."""
        return key in self._open

    def start(self, key: int | str, call_id: str, name: str) -> ToolCallStartEvent:
        """Begin a call; a new unique id when the wire has none."""
        index = self.count
        self.count += 1
        pending = _Pending(index=index, id=call_id or new_call_id(), name=name)
        self._open[key] = pending
        return ToolCallStartEvent(index=index, id=pending.id, name=name)

    def add(self, key: int | str, fragment: str) -> ToolCallDeltaEvent:
        """Append an argument fragment to the open call ``key``."""
        pending = self._open[key]
        pending.fragments.append(fragment)
        return ToolCallDeltaEvent(index=pending.index, arguments_delta=fragment)

    def close(self, key: int | str) -> ToolCallEndEvent | None:
        """Close call ``key``: its end event, or ``None`` when its arguments are not a JSON object
        (the call then waits for :meth:`settle`)."""
        pending = self._open.pop(key)
        try:
            arguments = parse_arguments("".join(pending.fragments))
        except ArgumentsError as err:
            self._unparsed.append((pending, str(err)))
            return None
        return ToolCallEndEvent(
            index=pending.index, id=pending.id, name=pending.name, arguments=arguments
        )

    def settle(self, *, cut: bool) -> list[ToolCallInvalidEvent]:
        """The verdict on closed calls whose arguments did not parse. ``cut``: the response was
        stopped by the output limit, so its last call, if among them, was truncated."""
        out = [
            ToolCallInvalidEvent(
                index=p.index,
                id=p.id,
                name=p.name,
                reason=InvalidToolCallReason.TRUNCATED
                if cut and p.index == self.count - 1
                else InvalidToolCallReason.INVALID_ARGUMENTS,
                raw_arguments="".join(p.fragments),
                error=why,
            )
            for p, why in self._unparsed
        ]
        self._unparsed.clear()
        return out

    def reject(self, key: int | str, error: str) -> ToolCallInvalidEvent:
        """Close call ``key`` as invalid for a reason the provider gave (its own parser failed)."""
        pending = self._open.pop(key)
        return ToolCallInvalidEvent(
            index=pending.index,
            id=pending.id,
            name=pending.name,
            reason=InvalidToolCallReason.INVALID_ARGUMENTS,
            raw_arguments="".join(pending.fragments),
            error=error,
        )

    def finish(self, key: int | str, *, cut: bool = False) -> ToolCallClose:
        """Close call ``key`` and give its verdict at once."""
        end = self.close(key)
        return end if end is not None else self.settle(cut=cut)[0]

    def finish_all(self, *, cut: bool = False) -> list[ToolCallClose]:
        """Close every open call (in start order) and every call awaiting a verdict."""
        keys = sorted(self._open, key=lambda k: self._open[k].index)
        ends: list[ToolCallClose] = [e for e in map(self.close, keys) if e is not None]
        return ends + self.settle(cut=cut)
