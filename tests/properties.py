"""How many examples the heaviest property tests draw.

``make test`` draws a third of each test's full count: every run draws new random examples (the
seed is not fixed), so CI covers the full count over a few runs, while one run stays within the
suite's time budget. ``make properties`` (``SOONG_DEEP_PROPERTIES=1``) draws the full count: run it
after changing the code such a test guards (path resolution, file access).
"""

from __future__ import annotations

import os

__all__ = ["examples"]


def examples(full: int) -> int:
    """``full`` under ``SOONG_DEEP_PROPERTIES=1``, else a third of it (at least 30)."""
    if os.environ.get("SOONG_DEEP_PROPERTIES") == "1":
        return full
    return max(full // 3, 30)
