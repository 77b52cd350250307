"""The layers the design draws: the library knows no service, and no package imports in circles.

Read from the source (every import statement, in functions too, and every module name given to
``importlib.import_module``), so a lazy import cannot hide an edge.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = [ROOT / "shared" / "agent_core", ROOT / "shared" / "soong_agent"]


def _module_name(path: Path) -> str:
    if not path.is_relative_to(ROOT):  # a probe written by a test: a top-level module
        return path.stem
    rel = path.relative_to(ROOT / "shared" if path.is_relative_to(ROOT / "shared") else ROOT)
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in ``path``, absolute names (relative ones resolved)."""
    package = (
        _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    )
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant | ast.JoinedStr)
        ):
            arg = node.args[0]
            text = arg.value if isinstance(arg, ast.Constant) else ast.unparse(arg)
            yield node.lineno, str(text).strip("f'\"")


def _sources(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py"))


def test_the_library_imports_no_service() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in _sources(*LIBRARY)
        for line, module in _imports(path)
        if module == "services" or module.startswith("services.")
    ]
    assert offenders == []


def test_the_lint_rule_refuses_a_service_import_in_the_library() -> None:
    source = "def f() -> None:\n    from services.gateway import keys\n\n    print(keys)\n"
    for where, banned in (
        ("shared/agent_core/probe.py", True),
        ("shared/soong_agent/probe.py", True),
        ("services/stack/probe.py", False),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", "check", "--stdin-filename", where, "-"],
            input=source,
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        assert ("TID251" in done.stdout) is banned, (where, done.stdout)


def _cycles(modules: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in modules[node]:
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in modules:
        if node not in index:
            visit(node)
    return groups


@pytest.mark.parametrize(
    "package",
    [
        "services/run_worker",
        "services/gateway",
        "services/storage_writer",
        "services/task_wal",
        "services/memory_extraction",
        "services/stack",
    ],
)
def test_a_service_package_has_no_import_cycle(package: str) -> None:
    paths = _sources(ROOT / package)
    names = {_module_name(p): p for p in paths}
    graph = {
        name: {
            module
            for _, module in _imports(path)
            if module in names
            and module != name
            and not name.startswith(module + ".")
            # a package's __init__ re-exports its modules: those edges point down, not around
            and path.name != "__init__.py"
        }
        for name, path in names.items()
    }
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The bottom of the library: what every other package may read. Each layer imports only from
# the layers listed before it (and the foundation: ``ids``, ``errors``), never from above: a
# types module that imported the task domain, or a configuration that imported the hooks, put
# nine packages into one import loop.
LAYERS = {
    "agent_core.types": ("agent_core.ids", "agent_core.errors"),
    "agent_core.config": ("agent_core.ids", "agent_core.errors", "agent_core.types"),
}


def _upward(package: str, allowed: tuple[str, ...], sources: list[Path]) -> list[str]:
    below = (package, *allowed)
    return [
        f"{path.name}:{line}: {module}"
        for path in sources
        for line, module in _imports(path)
        if module.startswith("agent_core.")  # (``agent_core`` alone: a ``from`` import's base)
        and not any(module == b or module.startswith(b + ".") for b in below)
    ]


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_the_bottom_layers_import_nothing_above_them(package: str) -> None:
    root = ROOT / "shared" / Path(*package.split("."))
    assert _upward(package, LAYERS[package], _sources(root)) == []


def test_the_layer_check_finds_an_upward_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from agent_core.hooks.engine import HookEngine\nimport agent_core.ids\n")
    assert _upward("agent_core.types", LAYERS["agent_core.types"], [probe]) == [
        "probe.py:1: agent_core.hooks.engine",
        "probe.py:1: agent_core.hooks.engine.HookEngine",
    ]


def test_the_library_packages_import_each_other_without_a_loop() -> None:
    """Package by package (``agent_core.bus``, ``agent_core.tasks``, …): no two need each other."""
    root = ROOT / "shared" / "agent_core"
    graph: dict[str, set[str]] = {}
    for path in _sources(root):
        package = path.relative_to(root).parts[0].removesuffix(".py")
        deps = graph.setdefault(package, set())
        for _, module in _imports(path):
            if module.startswith("agent_core.") and module.split(".")[1] != package:
                deps.add(module.split(".")[1])
    graph = {name: deps & set(graph) for name, deps in graph.items()}
    assert _cycles(graph) == []
