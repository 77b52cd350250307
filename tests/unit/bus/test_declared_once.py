"""Bus names, key lifetimes and the terminal statuses are declared once, and used from there."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from agent_core.bus.names import BusNames, BusTtl, memory_bucket
from agent_core.types.enums import (
    RUN_END_EVENTS,
    TERMINAL_RUN_EVENTS,
    TERMINAL_RUN_STATUSES,
    EventType,
    RunStatus,
)

_ROOT = Path(__file__).resolve().parents[3]
_NAMES = _ROOT / "shared" / "agent_core" / "bus" / "names.py"
_ENUMS = _ROOT / "shared" / "agent_core" / "types" / "enums.py"


def _sources() -> Iterator[tuple[Path, ast.Module]]:
    paths = [*(_ROOT / "shared").rglob("*.py"), *(_ROOT / "services").rglob("*.py")]
    assert len(paths) > 200
    for path in sorted(paths):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(_ROOT)}:{getattr(node, 'lineno', 0)}"


def _constant(node: ast.expr) -> bool:
    """A number written in place (``3600``, ``7 * 24 * 3600``), not a declared name."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float)
    if isinstance(node, ast.BinOp):
        return _constant(node.left) and _constant(node.right)
    return False


def test_keys_are_built_only_by_bus_names() -> None:
    """Outside ``names.py`` nothing spells a key from its parts (``names.key(...)``)."""
    found = [
        _where(path, node)
        for path, tree in _sources()
        if path != _NAMES
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "key"
        and node.args
        and all(isinstance(a, ast.Constant | ast.Name | ast.Subscript) for a in node.args)
        and isinstance(node.args[0], ast.Constant)
    ]
    assert found == []


def test_key_lifetimes_come_from_bus_ttl() -> None:
    """Every ``SET … EX/PX`` and ``EXPIRE``/``PEXPIRE`` takes its lifetime from :class:`BusTtl`
    (or from settings), never from a number written where the key is set."""
    literal: list[str] = []
    declared = 0
    for path, tree in _sources():
        for node in ast.walk(tree):
            values: list[ast.expr] = _command_lifetimes(node)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "set":
                    values = [k.value for k in node.keywords if k.arg in {"ex", "px"}]
                elif node.func.attr in {"expire", "pexpire"} and len(node.args) >= 2:
                    values = [node.args[1]]
            for value in values:
                if _constant(value):
                    literal.append(_where(path, node))
                elif ast.unparse(value).startswith("BusTtl."):
                    declared += 1
    assert literal == []
    assert declared >= 10  # the scan sees the uses it guards


def _command_lifetimes(node: ast.AST) -> list[ast.expr]:
    """The lifetimes in a command spelled as its words: ``("EXPIRE", key, ttl)``,
    ``execute("PEXPIRE", key, ttl)``, ``("SET", key, value, "EX", ttl)``."""
    if isinstance(node, ast.Tuple | ast.List):
        words = node.elts
    elif isinstance(node, ast.Call):
        words = node.args
    else:
        return []
    if not words or not isinstance(words[0], ast.Constant) or not isinstance(words[0].value, str):
        return []
    command = words[0].value.upper()
    if command in {"EXPIRE", "PEXPIRE"} and len(words) >= 3:
        return [words[2]]
    if command == "SET":
        return [
            after
            for word, after in zip(words, words[1:], strict=False)
            if isinstance(word, ast.Constant) and str(word.value).upper() in {"EX", "PX"}
        ]
    return []


def test_no_module_declares_a_lifetime_of_its_own() -> None:
    """Module-level ``*_TTL*``/``*_KEEP*``/``*EXPIRE*`` numbers live in ``names.py`` only."""
    own = []
    for path, tree in _sources():
        if path == _NAMES:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    name = target.id if isinstance(target, ast.Name) else ""
                    lifetime = any(w in name.upper() for w in ("TTL", "_KEEP", "EXPIRE"))
                    if lifetime and node.value is not None and _constant(node.value):
                        own.append(f"{_where(path, node)} {name}")
    # drive.py's is how long the worker remembers an early cancel in its own memory: no key's.
    assert [o for o in own if not o.endswith(" _EARLY_CANCEL_TTL_S")] == []


def test_named_keys_keep_their_spelling() -> None:
    """The declared keys are the ones running deployments hold; those renamed for Cluster slots
    (a hash tag each) are moved by the adoptions that read the spelling before."""
    n = BusNames("t")
    assert n.sessions_pending == n.key("sessions", "pending")
    assert n.sessions_due == n.key("sessions", "due")  # read once by adopt_legacy_lanes
    assert n.legacy_lane_keys("s") == (n.key("fifo", "{s}"), n.key("processing", "{s}"),
                                       n.key("lease", "{s}"))  # fmt: skip
    assert n.run_attempt("run_a") == n.key("attempt", "{run_a}")
    assert n.run_cancel("run_a") == n.key("cancel", "{run_a}")
    assert (n.api_keys, n.api_keys_used) == (n.key("{auth}", "apikeys"),
                                             n.key("{auth}", "apikeys", "used"))  # fmt: skip
    assert n.rate_limit("b") == n.key("{auth}", "ratelimit", "b")
    assert n.auth_failures("h") == n.key("authfail", "h")
    assert n.gateway_wake("hub_1") == n.key("gateway", "wake", "hub_1")
    assert n.sse_slots("k") == n.key("sse", "k")
    bucket = memory_bucket("a")
    assert n.memory_due(bucket) == n.key("memory", "due", f"{{memory-{bucket}}}")
    assert n.memory_pending("a") == n.key("memory", "pending", f"{{memory-{bucket}}}", "a")
    assert n.memory_failed("a") == n.key("memory", "failed", f"{{memory-{bucket}}}", "a")
    assert n.memory_lock("a") == n.key("memory", "lock", f"{{memory-{bucket}}}", "a")
    assert BusTtl.PERMISSION_S == 7 * 24 * 3600 and BusTtl.RUN_ATTEMPT_S == 30 * 24 * 3600


def test_terminal_statuses_and_their_events_are_one_declaration() -> None:
    assert set(RUN_END_EVENTS) == TERMINAL_RUN_STATUSES
    assert set(RUN_END_EVENTS.values()) == TERMINAL_RUN_EVENTS
    assert {s.value for s in TERMINAL_RUN_STATUSES} == {
        "completed",
        "failed",
        "aborted",
        "cancelled",
    }
    assert all(RUN_END_EVENTS[s].value == f"run_{s.value}" for s in TERMINAL_RUN_STATUSES)


def test_no_module_spells_the_terminal_sets_again() -> None:
    """A set (or map) naming every terminal status, or every terminal event, is ``enums``'s."""
    statuses = {f"RunStatus.{s.name}" for s in TERMINAL_RUN_STATUSES}
    events = {f"EventType.{e.name}" for e in TERMINAL_RUN_EVENTS}
    assert all(isinstance(getattr(RunStatus, s.split(".")[1]), RunStatus) for s in statuses)
    assert all(isinstance(getattr(EventType, e.split(".")[1]), EventType) for e in events)
    again = []
    for path, tree in _sources():
        if path == _ENUMS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Set):
                members = {ast.unparse(e) for e in node.elts}
            elif isinstance(node, ast.Dict):
                members = {ast.unparse(k) for k in node.keys if k is not None}
            else:
                continue
            if statuses <= members or events <= members:
                again.append(_where(path, node))
    # A child agent's status after its run is a map of its own (apply_end._AGENT_END).
    assert [w for w in again if "apply_end.py" not in w] == []
