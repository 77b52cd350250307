"""``pyproject.toml`` and the code agree: every third-party module that ``shared/`` and
``services/`` import is declared, and every declared runtime dependency is imported.

Module names map to distributions through the installed metadata
(``importlib.metadata.packages_distributions``); a dependency declared with extras
(``redis[hiredis]``) declares what those extras require too.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as metadata
import re
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = frozenset({"agent_core", "soong_agent", "services"})
# Declared and used, but never by an import statement: the reason is the entry.
USED_WITHOUT_IMPORT = {
    # uvicorn loads its C HTTP parser by name (services/gateway/service.py: http="httptools").
    "httptools": "uvicorn's http='httptools'",
}
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(text: str) -> tuple[str, tuple[str, ...]]:
    match = _NAME.match(text)
    assert match, text
    extras = tuple(e.strip() for e in (match.group(2) or "").split(",") if e.strip())
    return _norm(match.group(1)), extras


def _declared() -> set[str]:
    """The runtime dependencies' distribution names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_requirement(r)[0] for r in project["dependencies"]}


def _declared_with_extras() -> set[str]:
    """Declared distributions and what their declared extras require."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names: set[str] = set()
    for text in project["dependencies"]:
        name, extras = _requirement(text)
        names.add(name)
        for extra in extras:
            for req in metadata.requires(name) or []:
                if re.search(rf"extra\s*==\s*['\"]{re.escape(extra)}['\"]", req):
                    names.add(_requirement(req)[0])
    return names


def _imports(files: Iterable[Path], root: Path = ROOT) -> dict[str, list[str]]:
    """Top-level module → the files importing it (every import statement, in functions too)."""
    found: dict[str, list[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.partition(".")[0]
                if top in sys.stdlib_module_names or top in FIRST_PARTY:
                    continue
                found.setdefault(top, []).append(str(path.relative_to(root)))
    return found


@functools.cache  # one scan of every module for the tests below (seconds on a slow machine)
def _third_party() -> dict[str, list[str]]:
    return _imports(p for top in ("shared", "services") for p in (ROOT / top).rglob("*.py"))


def test_every_imported_module_is_declared() -> None:
    dists = metadata.packages_distributions()
    declared = _declared_with_extras()
    undeclared = {
        module: (sorted(set(files))[:2], dists.get(module))
        for module, files in _third_party().items()
        if not {_norm(d) for d in dists.get(module, [])} & declared
    }
    assert undeclared == {}, "declare these in pyproject.toml [project] dependencies"


def test_every_declared_dependency_is_imported() -> None:
    dists = metadata.packages_distributions()
    imported = {_norm(d) for module in _third_party() for d in dists.get(module, [])}
    unused = sorted(_declared() - imported - set(USED_WITHOUT_IMPORT))
    assert unused == [], "imported nowhere in shared/ or services/: remove, or use them"


def test_the_scan_finds_lazy_imports_and_extras_declare_their_modules(tmp_path: Path) -> None:
    # An import inside a function counts; the standard library and our own packages do not.
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nimport agent_core.ids\ndef f():\n    import aiosqlite.core\n")
    assert list(_imports([probe], tmp_path)) == ["aiosqlite"]
    assert "aiosqlite" not in _declared_with_extras()  # the writer's own thread serves instead
    assert "hiredis" in _declared_with_extras()  # declared through redis[hiredis]
