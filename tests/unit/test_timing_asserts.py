"""No test asserts that something took less than a fixed time.

Such an assertion holds on a quiet machine and fails on a busy one (CI, a laptop building at the
same time): the suite then fails at random and teaches people to rerun instead of read. What a
test proves about time it proves by order (the cancel ended the run before its stream did: the
stream was cut), by a gate the test holds (the reply came while the test still held the write's
transaction), or it is a figure for a benchmark (``make bench``). A hang guard is a timeout
(:mod:`tests.waiting`), not an assertion.

A lower bound stays allowed (``elapsed >= retry_after``): it proves a wait the test asked for did
happen, measured against that delay, and a slow machine only makes it truer.

The check reads each test module's syntax tree: a value is clock-derived when it contains a call
of ``time.monotonic``/``perf_counter``/``time`` (or their ``_ns`` forms) or of the event loop's
``time()`` (``asyncio.get_running_loop().time()``, ``loop.time()``), or a name, attribute or
function result assigned from one, or a loop variable taken from one; an ``assert`` that compares
such a value as below (``<``, ``<=``, or ``>``/``>=`` with the clock on the right) a number
written in the code, or a module constant bound to one, is reported with its file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}
EVENT_LOOPS = {
    f"{module}{name}"
    for module in ("", "asyncio.")
    for name in ("get_running_loop", "get_event_loop")
}


def _is_clock_call(node: ast.AST, clock_names: set[str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in CLOCKS:
        return (isinstance(func.value, ast.Name) and func.value.id in ("time", "loop")) or (
            # the event loop's clock: ``asyncio.get_running_loop().time()``
            func.attr == "time"
            and isinstance(func.value, ast.Call)
            and _key(func.value.func) in EVENT_LOOPS
        )
    return isinstance(func, ast.Name) and func.id in clock_names


def _key(node: ast.AST) -> str | None:
    """A name or a dotted attribute (``self.started``) as one key."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _key(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


class _Module:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.clock_names = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "time"
            for alias in node.names
            if alias.name in CLOCKS
        }
        self.constants = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name) and _numeric(node.value, set())
        }
        self.tainted: set[str] = set()
        self.tainted_functions: set[str] = set()
        self._propagate()

    def clocked(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if _is_clock_call(sub, self.clock_names):
                return True
            key = _key(sub)
            if key is not None and key in self.tainted:
                return True
            if isinstance(sub, ast.Call):
                name = _key(sub.func)
                if name is not None and name.rsplit(".", 1)[-1] in self.tainted_functions:
                    return True
        return False

    def _propagate(self) -> None:
        """Taint what is assigned from a clock-derived value, until nothing new is tainted."""
        flows: list[tuple[ast.AST, list[ast.AST]]] = []  # (value, where it goes)
        returns: list[tuple[ast.AST, str]] = []  # (returned value, function)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value:
                flows.append(
                    (node.value, node.targets if isinstance(node, ast.Assign) else [node.target])
                )
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                # ``for sid, killed_at in kills``: each item of a clock-holding list is one
                flows.append((node.iter, [node.target]))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                # ``latencies.append(time.perf_counter() - t0)``: the list holds clock values
                if node.func.attr in ("append", "add", "extend") and node.args:
                    flows.extend((arg, [node.func.value]) for arg in node.args)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                returns.extend(
                    (sub.value, node.name)
                    for sub in ast.walk(node)
                    if isinstance(sub, ast.Return) and sub.value is not None
                )
        while True:
            before = (len(self.tainted), len(self.tainted_functions))
            for value, targets in flows:
                if self.clocked(value):
                    for target in targets:
                        self.tainted.update(_stored(target))
            for value, name in returns:
                if name not in self.tainted_functions and self.clocked(value):
                    self.tainted_functions.add(name)
            if (len(self.tainted), len(self.tainted_functions)) == before:
                return


def _stored(target: ast.AST) -> set[str]:
    """The keys a value is stored under: ``x``, ``a, b``, ``self.x``, ``noticed[k]`` (all of
    ``noticed``)."""
    if isinstance(target, ast.Tuple | ast.List):
        return {key for element in target.elts for key in _stored(element)}
    if isinstance(target, ast.Subscript | ast.Starred):
        return _stored(target.value)
    key = _key(target)
    return set() if key is None else {key}


def _numeric(node: ast.AST | None, constants: set[str]) -> bool:
    """A number written in the code (``1.0``, ``2 * 0.5``, ``-1``) or a constant bound to one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand, constants)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left, constants) and _numeric(node.right, constants)
    return isinstance(node, ast.Name) and node.id in constants


def timing_asserts(source: str) -> list[int]:
    """Lines of ``source`` whose ``assert`` bounds a clock-derived value above by a constant."""
    module = _Module(ast.parse(source))
    found: list[int] = []
    for node in ast.walk(module.tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            left = compare.left
            for op, right in zip(compare.ops, compare.comparators, strict=True):
                below = isinstance(op, ast.Lt | ast.LtE)
                above = isinstance(op, ast.Gt | ast.GtE)
                clock, bound = (left, right) if below else (right, left) if above else (None, None)
                if (
                    clock is not None
                    and module.clocked(clock)
                    and _numeric(bound, module.constants)
                ):
                    found.append(node.lineno)
                left = right
    return found


def test_the_check_finds_what_it_is_meant_to_find() -> None:
    flagged = """
import time
from time import perf_counter
LIMIT_S = 3.0
def _timed():
    started = time.monotonic()
    return "x", time.monotonic() - started
async def f(xs):
    started = time.monotonic()
    assert time.monotonic() - started < 1.0
    elapsed = time.monotonic() - started
    assert elapsed <= 2
    how, took = _timed()
    assert how == "x" and took < LIMIT_S
    t0 = perf_counter()
    lat = []
    lat.append(perf_counter() - t0)
    assert max(lat, default=0.0) < 1.0
    assert 5 > elapsed
    kills = [("s1", time.time())]
    waits = []
    for sid, killed_at in kills:
        waits.append(time.time() - killed_at)
    assert max(waits) < 30
    assert all(w < 30 for w in [time.time() - k for _, k in kills])
    t1 = asyncio.get_running_loop().time()
    assert asyncio.get_running_loop().time() - t1 < 2.0
    loop = asyncio.get_running_loop()
    assert loop.time() - t1 <= 2
"""
    assert timing_asserts(flagged) == [10, 12, 14, 18, 19, 24, 25, 27, 29]
    allowed = """
import time
def f(deadline, retry_after):
    started = time.monotonic()
    elapsed = time.monotonic() - started
    assert elapsed >= 0.09
    assert time.monotonic() < deadline
    assert len([1]) < 3
    assert elapsed < retry_after * 10
    deadline = asyncio.get_running_loop().time() + 10
    assert asyncio.get_running_loop().time() < deadline
"""
    assert timing_asserts(allowed) == []


def test_no_test_bounds_a_duration_by_a_constant() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name == Path(__file__).name:
            continue
        for line in timing_asserts(path.read_text(encoding="utf-8")):
            found.append(f"{path.relative_to(TESTS.parent)}:{line}")
    assert not found, "assertions that a test took less than a fixed time:\n" + "\n".join(found)
