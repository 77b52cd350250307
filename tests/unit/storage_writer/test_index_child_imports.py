"""The search index's child starts light: it imports what a flush needs and no more.

A writer starts the child at its own start and again after a child died; with the service's
imports (asyncio, pydantic, the Redis client, Prometheus) that start cost ~0.2 s of CPU, which the
storage bench's first phase counted as the writer's. These run a fresh interpreter, as the writer
does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_core.errors import SchemaError
from agent_core.ids import validate_session_id

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("asyncio", "pydantic", "pydantic_core", "redis", "prometheus_client", "httpx")


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return {name.split(".")[0] for name in json.loads(done.stdout)}


def test_the_child_imports_no_service_library() -> None:
    loaded = _loaded_after("import services.storage_writer.index_child")
    assert "sqlite3" in loaded and "services" in loaded  # it did import the child
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_the_service_side_still_loads_them() -> None:
    # The check above can fail: the writer's side of the same pipe does import them.
    loaded = _loaded_after("import services.storage_writer.index_process")
    assert "asyncio" in loaded


def test_a_refused_session_id_still_raises_the_schema_error() -> None:
    # ids imports the error class when it refuses an id, no longer with the module.
    with pytest.raises(SchemaError) as info:
        validate_session_id("sess_x; DROP TABLE nodes")
    assert info.value.code == "invalid_identifier"
    with pytest.raises(SchemaError) as info:
        validate_session_id("not_a_session")
    assert info.value.code == "invalid_session_id"
