"""Figures that tests print: run them once and read each figure from their output.

Tests assert what happened, never how fast; the ones whose speed is promised print it (``-s``),
and a benchmark holds the figure to its promise.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def printed_figures(tests: list[str], patterns: dict[str, str], what: str) -> dict[str, float]:
    """Run ``tests`` with pytest and return, per name, the largest number its pattern's group
    found in their output; exits naming ``what`` if the tests fail or a figure is missing."""
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *tests]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-5000:] + done.stderr[-2000:])
        raise SystemExit(f"the {what} tests failed (exit {done.returncode})")
    figures: dict[str, float] = {}
    for name, pattern in patterns.items():
        found = [float(v) for v in re.findall(pattern, done.stdout)]
        if not found:
            raise SystemExit(f"no figure {name!r} in the tests' output")
        figures[name] = max(found)
    return figures
