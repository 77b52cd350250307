"""Where ``soong-agent up`` writes how to reach the running stack: the embedded Valkey's URL (with
its password: the file is its owner's alone), the gateway's URL, its pid and the ops ports.

A module of its own so that the commands that read it (``keys``, ``serve``) need not import
``up`` and everything it starts.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["STACK_FILE"]

STACK_FILE = Path("run/stack.json")  # relative to the home
