"""Assembling streamed tool calls: fragments by wire key, parsed and validated at the end.

Providers identify a streamed call differently (OpenAI ``tool_calls[].index``, Anthropic the
content block index, Ollama the position in the message); the assembler keys calls by that wire
key and numbers them 0, 1, … in the order they started, which is the ``index`` the normalized
events carry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent_core.errors import ProviderError
from agent_core.types.protocol import ToolCallDeltaEvent, ToolCallEndEvent, ToolCallStartEvent

__all__ = ["ToolCallAssembler", "parse_arguments"]


@dataclass
class _Pending:
    index: int
    id: str
    name: str
    fragments: list[str] = field(default_factory=list)


def parse_arguments(provider: str, name: str, raw: str) -> dict[str, Any]:
    """Parse a tool call's arguments; they must be a JSON object (empty text means ``{}``)."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as err:
        raise _invalid(provider, name, "not valid JSON", err) from err
    if not isinstance(value, dict):
        raise _invalid(provider, name, f"a JSON {type(value).__name__}, not an object", None)
    return value


def _invalid(provider: str, name: str, why: str, cause: BaseException | None) -> ProviderError:
    # The arguments themselves stay out of the message: they may hold user data.
    return ProviderError(
        "invalid_tool_arguments",
        f"{provider}: arguments of tool call {name!r} are {why}",
        details={"tool_name": name},
        cause=cause,
        provider=provider,
    )


class ToolCallAssembler:
    """Collects argument fragments of the tool calls of one response."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self._open: dict[int | str, _Pending] = {}
        self.count = 0

    def is_open(self, key: int | str) -> bool:
        """Whether the call with this wire key started and has not finished."""
        return key in self._open

    def start(self, key: int | str, call_id: str, name: str) -> ToolCallStartEvent:
        """Begin a call; the id defaults to one derived from its position when the wire has none."""
        index = self.count
        self.count += 1
        pending = _Pending(index=index, id=call_id or f"call_{index}", name=name)
        self._open[key] = pending
        return ToolCallStartEvent(index=index, id=pending.id, name=name)

    def add(self, key: int | str, fragment: str) -> ToolCallDeltaEvent:
        """Append an argument fragment to the open call ``key``."""
        pending = self._open[key]
        pending.fragments.append(fragment)
        return ToolCallDeltaEvent(index=pending.index, arguments_delta=fragment)

    def finish(self, key: int | str) -> ToolCallEndEvent:
        """Close call ``key``; raises ``ProviderError`` when its arguments are not a JSON object."""
        pending = self._open.pop(key)
        arguments = parse_arguments(self.provider, pending.name, "".join(pending.fragments))
        return ToolCallEndEvent(
            index=pending.index, id=pending.id, name=pending.name, arguments=arguments
        )

    def finish_all(self) -> list[ToolCallEndEvent]:
        """Close every open call, in the order they started."""
        keys = sorted(self._open, key=lambda k: self._open[k].index)
        return [self.finish(k) for k in keys]
