"""Usage totals: tokens summed over the runs that ended, by session, by account, day and model.

Private: import these names from :mod:`agent_core.types.runtime` (:class:`UsageTotals`, on a
session's view) or :mod:`agent_core.types.api` (the ``GET /v1/usage`` report). The storage-writer
keeps them as counters, added to in the transaction that ends each run (``usage_totals``), so no
total is ever summed from the runs themselves.
"""

from __future__ import annotations

import datetime as dt

from pydantic import Field

from agent_core.types._fields import Strict

__all__ = ["FileChange", "RunFiles", "UsageReport", "UsageRow", "UsageTotals"]

_COUNT = Field(default=0, ge=0, le=2**63 - 1)  # SQLite's INTEGER


class UsageTotals(Strict):
    """Tokens of the runs that ended (``runs``: how many of them used any); ``total_tokens``
    is input plus output, the figure a token budget counts."""

    runs: int = _COUNT
    input_tokens: int = _COUNT
    output_tokens: int = _COUNT
    cache_read_tokens: int = _COUNT
    cache_write_tokens: int = _COUNT
    total_tokens: int = _COUNT


class UsageRow(UsageTotals):
    """One day (UTC, the day the runs ended) and model of an account's usage."""

    day: dt.date
    model: str


class UsageReport(Strict):
    """``GET /v1/usage``: the caller's account's usage from ``since`` to ``until`` (days, both
    included), one row per day and model (oldest day first), and their sum."""

    since: dt.date | None = None
    until: dt.date | None = None
    items: list[UsageRow]
    totals: UsageTotals


class FileChange(Strict):
    """A file a run's tool call created, modified or deleted in ``output/`` or ``scratchpad/``."""

    path: str
    area: str
    change: str
    size_bytes: int | None = None
    artifact_id: str | None = None  # an output/ file is registered as an artifact
    tool_call_id: str | None = None
    tool: str | None = None
    node_id: str | None = None  # the tool node holding the call's result
    at: str | None = None  # when the call ended (ISO-8601 UTC)


class RunFiles(Strict):
    """``GET …/runs/{run_id}/files``: the run's file changes in the order its calls ended."""

    run_id: str
    items: list[FileChange]
