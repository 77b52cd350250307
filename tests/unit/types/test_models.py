"""Cross-cutting rules of every model in agent_core.types: extra="forbid", declared extension points,
StrEnum values, and pinned public surfaces."""

from __future__ import annotations

import inspect
import typing
from enum import StrEnum
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import agent_core.types as types_pkg
from agent_core import errors
from agent_core.types import _state, enums, mappers, protocol, runtime, storage

EXTENSION_FIELDS = {"metadata", "provider_options", "raw"}
MODULES: list[ModuleType] = [protocol, runtime, storage, errors]


def _models() -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for module in MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, BaseModel):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


MODELS = _models()


def test_models_are_found() -> None:
    names = {m.__name__ for m in MODELS}
    assert {
        "TextBlock",
        "Node",
        "RunState",
        "SessionRecord",
        "ErrorPayload",
        "AgentConfig",
    } <= names


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_every_model_forbids_unknown_fields(cls: type[BaseModel]) -> None:
    assert cls.model_config.get("extra") == "forbid", cls


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.__name__)
def test_extension_points_are_open_dicts(cls: type[BaseModel]) -> None:
    hints = typing.get_type_hints(cls)
    for name in EXTENSION_FIELDS & set(cls.model_fields):
        assert hints[name] == dict[str, Any], (cls, name)
        assert cls.model_fields[name].default_factory is dict, (cls, name)


def _examples() -> list[BaseModel]:
    from tests.unit.types.test_mappers import CANONICAL
    from tests.unit.types.test_protocol import BLOCKS, EVENTS
    from tests.unit.types.test_runtime import EXAMPLES

    return [*EXAMPLES, *CANONICAL.values(), *BLOCKS, *EVENTS]


EXAMPLES = _examples()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: type(e).__name__)
def test_unknown_field_is_refused_at_validation(example: BaseModel) -> None:
    data = example.model_dump()
    assert type(example).model_validate(data) == example
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        type(example).model_validate({**data, "surprise_field": 1})


def test_examples_cover_runtime_and_storage_models() -> None:
    covered = {type(e) for e in EXAMPLES}
    prefixes = ("agent_core.types._", "agent_core.types.runtime", "agent_core.types.storage")
    missing = [c.__name__ for c in MODELS if c.__module__.startswith(prefixes) and c not in covered]
    assert missing == []


def test_enums_are_str_enums_with_unique_lowercase_values() -> None:
    for name in enums.__all__:
        obj = getattr(enums, name)
        if not (inspect.isclass(obj) and issubclass(obj, StrEnum)):
            continue
        values = [m.value for m in obj]
        assert len(values) == len(set(values)), name
        assert all(v == v.lower() and " " not in v for v in values), name
        assert all(obj(v) == v for v in values)


def test_seed_000_enum_values() -> None:
    assert set(enums.SessionStatus) == {"active", "archived"}
    assert set(enums.AgentStatus) == {"idle", "running", "completed", "failed", "cancelled"}
    assert set(enums.RunStatus) == {
        "queued", "pending", "running", "completed", "failed", "aborted", "cancelled",
    }  # fmt: skip
    assert set(enums.EndReason) == {
        "completed", "max_turns", "aborted_streaming", "aborted_tools", "prompt_too_long",
        "max_output_tokens_recovery", "failed", "budget_exhausted",
    }  # fmt: skip
    assert "stop_hook_prevented" not in set(enums.EndReason)
    assert set(enums.AgentType) == {"main", "orchestrator", "sub", "fork"}
    assert {"message", "plan_instruction", "task_instruction", "task_board"} <= set(enums.NodeType)
    assert {"completed", "failed", "aborted", "cancelled"} == enums.TERMINAL_RUN_STATUSES


@pytest.mark.parametrize(
    "module",
    [types_pkg, protocol, runtime, storage, mappers, enums, _state],
    ids=lambda m: m.__name__,
)
def test_public_surface_is_explicit(module: ModuleType) -> None:
    for name in module.__all__:
        assert hasattr(module, name), name
    assert len(set(module.__all__)) == len(module.__all__)


def test_package_exports_the_six_layers() -> None:
    assert set(types_pkg.__all__) == {"api", "enums", "protocol", "runtime", "storage", "mappers"}
