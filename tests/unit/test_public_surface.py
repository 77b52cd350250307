"""Every agent_core subpackage pins its public surface with an explicit ``__all__``."""

from __future__ import annotations

import importlib
import pkgutil

import agent_core


def _subpackages() -> list[str]:
    return [
        info.name
        for info in pkgutil.walk_packages(agent_core.__path__, prefix="agent_core.")
        if info.ispkg
    ]


def test_there_are_subpackages_to_check() -> None:
    assert {"agent_core.bus", "agent_core.types", "agent_core.service", "agent_core.config"} <= set(
        _subpackages()
    )


def test_every_subpackage_has_an_explicit_all_that_resolves() -> None:
    missing = []
    for name in _subpackages():
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        if not isinstance(exported, list | tuple) or not exported:
            missing.append(name)
            continue
        for symbol in exported:
            assert hasattr(module, symbol), f"{name}.__all__ names {symbol!r}, which does not exist"
        assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
    assert missing == [], f"subpackages without __all__: {missing}"
