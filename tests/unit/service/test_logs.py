"""Service logs: one redacted line per record; an exception's traceback only in debug mode."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Literal

import pytest

from agent_core.config import Settings
from agent_core.service.logs import setup_logging

SECRET = "sk-" + "0a1b2c3d" * 4


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("debug", [False, True])
def test_exceptions_are_logged_redacted_with_a_traceback_only_in_debug_mode(
    debug: bool, fmt: Literal["text", "json"], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    settings = Settings.model_validate(
        {"home": str(tmp_path), "debug": debug, "observability": {"log_format": fmt}}
    )
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging(settings, "test", "0")
        try:
            raise RuntimeError(f"bad key {SECRET}")
        except RuntimeError:
            logging.getLogger("soong.test").exception("draining failed")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    out = stream.getvalue()
    assert "draining failed" in out and "RuntimeError" in out
    assert SECRET not in out and "[REDACTED]" in out
    assert ("Traceback" in out) is debug
    if not debug:
        assert len(out.strip().splitlines()) == 1
