"""Hang guards: a test that waits for an event stops, with the reason, if the event never comes.

A guard is a timeout, not a timing assertion: its limit is far beyond what the wait takes on the
busiest machine, and it fails only when something hangs (it says what was awaited, so the failure
reads better than pytest-timeout's stack dump). What a test proves about time it proves by order
or by a gate it holds; figures belong to the benchmarks (see ``tests/unit/test_timing_asserts.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["HangGuard", "Hung"]


class Hung(AssertionError):
    """What a test waited for never came within its guard's limit."""


class HangGuard:
    """Started at creation; :meth:`check` raises :class:`Hung` once ``limit_s`` has passed."""

    def __init__(self, limit_s: float, waiting_for: str) -> None:
        self.limit_s = limit_s
        self.waiting_for = waiting_for
        self._end = time.monotonic() + limit_s

    def check(self, detail: str | Callable[[], str] = "") -> None:
        """Raise :class:`Hung` (naming what was awaited, and ``detail``) past the limit; a
        callable ``detail`` (a log to read, say) is called only then."""
        if time.monotonic() > self._end:
            text = detail() if callable(detail) else detail
            tail = f"\n{text}" if text else ""
            raise Hung(f"waited {self.limit_s:g} s for {self.waiting_for}{tail}")
