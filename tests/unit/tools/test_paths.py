"""The lexical resolver: routing of logical paths and the refusals, by example and by property.

Property budget (issue 6 asks for >= 10,000 generated paths and symlink layouts): 6,000 + 3,000
examples here and 3,000 random symlink layouts (each with up to six query paths) in
test_fsaccess.py.
"""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_core.errors import PermissionDeniedError, ToolError
from agent_core.tools.paths import (
    DEFAULT_PLATFORM_DIRS,
    NAME_MAX,
    PATH_MAX,
    Area,
    InvalidPathError,
    PathErrorCode,
    PathEscapeError,
    SessionPath,
    WriteProtectedError,
    ensure_writable,
    resolve_logical,
)
from tests.properties import examples

ROOT = "/home/x/accounts/acct_1/sessions/sess_1"
CWD = SessionPath(("scratchpad",))


def resolve(raw: object) -> SessionPath:
    return resolve_logical(raw, session_roots=(ROOT,), cwd=CWD)


@pytest.mark.parametrize(
    ("raw", "parts"),
    [
        ("output/report.md", ("output", "report.md")),
        ("outputs/a/b.csv", ("output", "a", "b.csv")),
        ("scratchpad/x.py", ("scratchpad", "x.py")),
        ("scratch/x.py", ("scratchpad", "x.py")),
        ("input/data.csv", ("input", "data.csv")),
        ("inputs/data.csv", ("input", "data.csv")),
        ("./output//r.md", ("output", "r.md")),
        ("notes.txt", ("scratchpad", "notes.txt")),
        ("sub/./dir/../f", ("scratchpad", "sub", "f")),
        ("../output/f", ("output", "f")),
        (".", ("scratchpad",)),
        (ROOT + "/output/f", ("output", "f")),
        (ROOT, ()),
        ("output", ("output",)),
    ],
)
def test_routes_logical_and_relative_paths(raw: str, parts: tuple[str, ...]) -> None:
    assert resolve(raw).parts == parts


@pytest.mark.parametrize(
    ("raw", "code", "exc"),
    [
        ("", PathErrorCode.EMPTY, InvalidPathError),
        ("output/a\x00b", PathErrorCode.INVALID, InvalidPathError),
        ("output/" + "a" * (NAME_MAX + 1), PathErrorCode.NAME_TOO_LONG, InvalidPathError),
        ("output/" + "a/" * (PATH_MAX // 2), PathErrorCode.TOO_LONG, InvalidPathError),
        ("../../etc/passwd", PathErrorCode.ESCAPE, PathEscapeError),
        ("output/../../x", PathErrorCode.ESCAPE, PathEscapeError),
        ("/etc/passwd", PathErrorCode.ABSOLUTE_OUTSIDE, PathEscapeError),
        (ROOT + "/../sess_2/output/x", PathErrorCode.ABSOLUTE_OUTSIDE, PathEscapeError),
        (ROOT + "_evil/output/x", PathErrorCode.ABSOLUTE_OUTSIDE, PathEscapeError),
        ("output/\udc80\ud800", PathErrorCode.INVALID, InvalidPathError),
        (42, PathErrorCode.INVALID, InvalidPathError),
    ],
)
def test_refuses_bad_paths_with_typed_errors(raw: object, code: str, exc: type[Exception]) -> None:
    with pytest.raises(exc) as info:
        resolve(raw)
    assert info.value.code == code  # type: ignore[attr-defined]
    assert str(info.value)


def test_escape_errors_are_permission_denials_and_invalid_paths_tool_errors() -> None:
    assert issubclass(PathEscapeError, PermissionDeniedError)
    assert issubclass(WriteProtectedError, PermissionDeniedError)
    assert issubclass(InvalidPathError, ToolError)


def _writable(parts: tuple[str, ...], allow: bool = False) -> bool:
    try:
        ensure_writable(
            SessionPath(parts), platform_dirs=DEFAULT_PLATFORM_DIRS, allow_platform_work=allow
        )
    except WriteProtectedError:
        return False
    return True


def test_write_rules() -> None:
    assert _writable(("output", "r.md"))
    assert _writable(("scratchpad", "scripts", "x.py"))  # a folder of the agent's own
    assert not _writable(("input", "data.csv"))
    assert not _writable(("input", "data.csv"), allow=True)
    assert not _writable(("src", "app.py"))
    assert not _writable(("SRC", "app.py"))
    assert _writable(("src", "app.py"), allow=True)
    assert not _writable(("session.json",))
    assert not _writable(())
    assert not _writable((), allow=True)


# ------------------------------------------------------------------------------ properties

_SEGMENTS = st.sampled_from(
    [
        "..",
        ".",
        "",
        "input",
        "inputs",
        "output",
        "outputs",
        "scratch",
        "scratchpad",
        "src",
        "Scripts",
        "sess_2",
        "accounts",
        "a",
        "b.txt",
        "~",
        "\\..",
        "...",
        " ",
        "\x00",
        "é",
        "x" * 300,
    ]
)
_RAW_PATHS = st.one_of(
    st.lists(_SEGMENTS, max_size=12).map("/".join),
    st.lists(_SEGMENTS, max_size=12).map(lambda p: ROOT + "/" + "/".join(p)),
    st.lists(_SEGMENTS, max_size=8).map(lambda p: "/" + "/".join(p)),
    st.text(alphabet=st.sampled_from("./\\\x00ab~"), max_size=40),
    st.text(max_size=60),
)


def _inside(parts: tuple[str, ...]) -> bool:
    joined = posixpath.normpath(posixpath.join(ROOT, *parts))
    return joined == ROOT or joined.startswith(ROOT + "/")


@settings(max_examples=examples(6000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_RAW_PATHS)
def test_property_nothing_resolves_outside_the_session(raw: str) -> None:
    try:
        path = resolve(raw)
    except (InvalidPathError, PathEscapeError):
        return
    assert all(p not in ("", ".", "..") and "/" not in p and "\x00" not in p for p in path.parts)
    assert _inside(path.parts)


@settings(max_examples=examples(3000), deadline=None)
@given(_RAW_PATHS, st.booleans())
def test_property_no_write_into_input_or_platform(raw: str, allow: bool) -> None:
    try:
        path = resolve(raw)
    except (InvalidPathError, PathEscapeError):
        return
    if not _writable(path.parts, allow=allow):
        return
    assert path.parts[0] != Area.INPUT.value
    if not allow:
        assert path.parts[0] in (Area.SCRATCHPAD.value, Area.OUTPUT.value)
