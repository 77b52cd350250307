"""The committed screenshots of the console show the console as it is (see screenshots.py)."""

from __future__ import annotations

import json

from tests.e2e.console.screenshots import DOCS, MANIFEST, VIEWS, console_hash


def test_every_main_view_has_a_screenshot_taken_from_the_current_console() -> None:
    manifest = json.loads(MANIFEST.read_text())
    assert manifest["views"] == list(VIEWS)
    for view in VIEWS:
        data = (DOCS / f"{view}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", view
    assert manifest["console_sha256"] == console_hash(), (
        "the console's files changed since docs/console/ was taken: run "
        "`make console-screenshots` and commit docs/console/"
    )
