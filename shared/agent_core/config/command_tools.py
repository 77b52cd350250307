"""The ``[tools.<name>]`` tables of ``config.toml``: command tools the operator declares.

::

    [tools.weather]
    description = "Today's weather for a city"
    command = ["/usr/bin/python3", "/srv/tools/weather.py"]   # argv, run without a shell
    input_schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
    timeout_s = 10              # optional: the sandbox's timeout by default
    writes = false              # optional: whether it changes files (default true)

The tool gets its arguments as one JSON object on stdin and answers one JSON value on stdout
(``agent_core/tools/command.py``). Every problem is refused when the file is read: a bad name, an
empty command, a schema that is not a valid JSON Schema for an object.
"""

from __future__ import annotations

import re
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["TOOL_NAME", "CommandToolSettings"]

# What providers accept as a tool name; ``mcp__`` names belong to MCP servers' tools.
TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class CommandToolSettings(BaseModel):
    """One declared command tool (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = Field(min_length=1, max_length=4000)
    command: tuple[str, ...] = Field(min_length=1, max_length=256)
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    timeout_s: float | None = Field(default=None, gt=0, le=3600)
    writes: bool = True
    repeatable: bool = False

    @field_validator("command")
    @classmethod
    def _argv(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value[0].strip():
            raise ValueError("command: the first element (the program) is empty")
        if any("\x00" in part for part in value):
            raise ValueError("command holds a NUL character")
        return value

    @model_validator(mode="after")
    def _schema(self) -> CommandToolSettings:
        if self.input_schema.get("type") != "object":
            raise ValueError('input_schema: the arguments are one JSON object (type = "object")')
        # Imported here: only a configuration that declares command tools pays for it.
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(self.input_schema)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(top)"
            why = f"input_schema is not a valid JSON Schema at {where}: {exc.message}"
            raise ValueError(why) from None
        return self
