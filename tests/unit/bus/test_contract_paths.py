"""No bus contract carries a host path: every path-like string field admits logical paths only.

A message crosses hosts (any worker may take a session's next run, any task-wal instance its
lists), so a folder of one host must never travel on the bus. The check reads the contracts'
JSON schemas (the AsyncAPI document the ``asyncapi`` command prints) and needs every string field
whose name ends in a path-like word to carry a pattern that refuses absolute host paths.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from agent_core.bus.asyncapi import asyncapi_document

# A field whose last word is one of these names a place in a file system.
_PATH_WORDS = {
    "path",
    "paths",
    "dir",
    "dirs",
    "directory",
    "cwd",
    "home",
    "folder",
    "file",
    "root",
    "project",
}
_HOST_PATHS = ("/srv/soong/home/accounts/a/sessions/s", "C:\\soong\\home", "~/soong", "\\\\host\\x")


def _strings(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The string schemas a property admits (directly, in a union, or as array items)."""
    if schema.get("type") == "string":
        yield schema
    for union in ("anyOf", "oneOf"):
        for option in schema.get(union, []):
            yield from _strings(option)
    if isinstance(schema.get("items"), dict):
        yield from _strings(schema["items"])


def _path_fields(node: object, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (``Model.field``, string schema) of a path-like field anywhere in ``node``."""
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if name.lower().split("_")[-1] in _PATH_WORDS and isinstance(prop, dict):
                for string in _strings(prop):
                    yield f"{node.get('title', where)}.{name}", string
        for key, value in node.items():
            yield from _path_fields(value, key)
    elif isinstance(node, list):
        for value in node:
            yield from _path_fields(value, where)


def test_no_contract_field_admits_a_host_path() -> None:
    document = json.loads(asyncapi_document())
    fields = list(_path_fields(document, "asyncapi"))
    # The walk finds the path fields that exist (a walk that finds none would prove nothing).
    names = {name for name, _ in fields}
    assert {"TaskScope.project", "ArtifactRef.path", "PlanRef.path"} <= names
    open_fields = [
        name
        for name, string in fields
        if "pattern" not in string or any(re.search(string["pattern"], p) for p in _HOST_PATHS)
    ]
    assert open_fields == []


def test_task_messages_name_no_host_folder() -> None:
    document = json.loads(asyncapi_document())
    schemas = document["components"]["schemas"]
    for message in ("TaskCommandMessage", "TaskQueryMessage"):
        assert "cwd" not in schemas[message]["properties"]
        assert "scope" in schemas[message]["required"]
