"""Screenshots of the console's main views under ``docs/console/``, and how they are kept current.

The browser tests take every screenshot on every run (into the test's temporary folder), so the
views they show are exercised. They replace the committed ones in ``docs/console/`` only when
``SOONG_CONSOLE_SCREENSHOTS=1`` (``make console-screenshots``), and record there the hash of the
console's files they were taken from; ``test_screenshots_current.py`` fails when the console's
files changed since, so a change to the console comes with fresh pictures of it. (Writing them on
every run would leave every developer's tree dirty: the pictures hold ids and times.)
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from playwright.sync_api import Page

from services.gateway.routes_console import CONSOLE_DIR

DOCS = Path(__file__).resolve().parents[3] / "docs" / "console"
MANIFEST = DOCS / "screenshots.json"
VIEWS = ("chat", "permission", "tree", "runs", "files", "tasks", "memory", "assistants")


def console_hash() -> str:
    """SHA-256 over the console's files (relative paths and bytes, in path order)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in CONSOLE_DIR.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(CONSOLE_DIR)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def updating() -> bool:
    """Whether this run refreshes the committed screenshots."""
    return os.environ.get("SOONG_CONSOLE_SCREENSHOTS") == "1"


def capture(page: Page, view: str, tmp: Path) -> Path:
    """Screenshot the page as ``view``: into ``tmp``, and into docs/console/ when updating."""
    assert view in VIEWS, view
    shot = tmp / f"{view}.png"
    page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if updating():
        DOCS.mkdir(parents=True, exist_ok=True)
        (DOCS / f"{view}.png").write_bytes(shot.read_bytes())
        MANIFEST.write_text(
            json.dumps({"console_sha256": console_hash(), "views": list(VIEWS)}, indent=2) + "\n"
        )
    return shot
