"""Regular expressions from models and users, matched in linear time (RE2).

Python's ``re`` backtracks: a pattern such as ``(a+)+$`` over a long line holds the interpreter
for seconds to forever, and a thread running it cannot be stopped. RE2 guarantees time linear in
the input and memory bounded by ``max_mem``; the price is its syntax, which has no backreferences
and no look-around (such a pattern is a clear error, not a hang).
"""

from __future__ import annotations

from typing import Any, Final, Protocol

import re2

from agent_core.errors import ToolError

__all__ = ["LinearRegex", "compile_linear"]

_MAX_MEM: Final = 64 * 1024 * 1024  # RE2's budget for one compiled pattern's automata
MAX_PATTERN_CHARS: Final = 4096


class LinearRegex(Protocol):
    """The part of a compiled RE2 pattern the tools use."""

    def search(self, text: str) -> Any: ...

    def match(self, text: str) -> Any: ...


def compile_linear(
    pattern: str, *, ignore_case: bool = False, dot_all: bool = False
) -> LinearRegex:
    """Compile ``pattern`` with RE2; a pattern it cannot take raises ``ToolError(invalid_regex)``."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(
            "invalid_regex", f"the pattern is longer than {MAX_PATTERN_CHARS} characters"
        )
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.dot_nl = dot_all
    options.max_mem = _MAX_MEM
    try:
        compiled: LinearRegex = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ToolError(
            "invalid_regex",
            f"invalid regular expression ({reason}); RE2 syntax: no backreferences, no look-around",
        ) from exc
    return compiled
