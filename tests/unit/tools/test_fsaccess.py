"""Confined file access: symlinks in, out and swapped, by example and over random layouts."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_core.tools import fsaccess
from agent_core.tools.paths import (
    InvalidPathError,
    PathErrorCode,
    PathEscapeError,
    SessionPath,
    WriteProtectedError,
)
from agent_core.tools.workspace import Workspace
from tests.properties import examples

SECRET = b"TOP-SECRET-OUTSIDE"


def make_shared(home: Path) -> None:
    """What lies around the session under test: another session and a folder outside."""
    other = Workspace(home, "acct_1", "sess_2")
    other.ensure()
    (other.root / "output" / "theirs.txt").write_bytes(SECRET)
    (home / "outside").mkdir()
    (home / "outside" / "secret.txt").write_bytes(SECRET)


def make_session(home: Path) -> Workspace:
    ws = Workspace(home, "acct_1", "sess_1")
    ws.ensure()
    (ws.root / "input" / "data.csv").write_bytes(b"a,b\n1,2\n")
    (ws.root / "src").mkdir()
    (ws.root / "src" / "app.py").write_bytes(b"print('platform')\n")
    return ws


def make_workspace(home: Path) -> Workspace:
    make_shared(home)
    return make_session(home)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return make_workspace(tmp_path)


def p(*parts: str) -> SessionPath:
    return SessionPath(parts)


def test_read_write_roundtrip_and_parent_creation(ws: Workspace) -> None:
    real = ws.fs.write_bytes(p("output", "a", "b", "r.md"), b"hello", check=ws.check_write)
    assert real == p("output", "a", "b", "r.md")
    assert ws.fs.read_bytes(real)[0] == b"hello"
    assert (ws.root / "output" / "a" / "b" / "r.md").read_bytes() == b"hello"
    assert [e.path.name for e in ws.fs.list_dir(p("output"))[1]] == ["a"]


def test_symlink_inside_the_session_is_followed(ws: Workspace) -> None:
    os.symlink("../input/data.csv", ws.root / "scratchpad" / "data")
    data, real = ws.fs.read_bytes(p("scratchpad", "data"))
    assert data == b"a,b\n1,2\n"
    assert real == p("input", "data.csv")


@pytest.mark.parametrize(
    "target",
    ["../../sess_2/output/theirs.txt", "../../../../../outside/secret.txt", "/etc/passwd"],
)
def test_symlink_pointing_out_is_refused(ws: Workspace, target: str) -> None:
    os.symlink(target, ws.root / "scratchpad" / "link")
    with pytest.raises(PathEscapeError) as info:
        ws.fs.read_bytes(p("scratchpad", "link"))
    assert info.value.code == PathErrorCode.SYMLINK_ESCAPE


def test_absolute_symlink_to_inside_is_followed(ws: Workspace) -> None:
    os.symlink(ws.root / "input", ws.root / "scratchpad" / "in")
    assert ws.fs.read_bytes(p("scratchpad", "in", "data.csv"))[0] == b"a,b\n1,2\n"


def test_symlink_loop_is_refused(ws: Workspace) -> None:
    os.symlink("b", ws.root / "scratchpad" / "a")
    os.symlink("a", ws.root / "scratchpad" / "b")
    with pytest.raises(PathEscapeError) as info:
        ws.fs.read_bytes(p("scratchpad", "a"))
    assert info.value.code == PathErrorCode.SYMLINK_LOOP


def test_write_through_symlink_into_input_is_refused(ws: Workspace) -> None:
    os.symlink("../input", ws.root / "scratchpad" / "in")
    with pytest.raises(WriteProtectedError) as info:
        ws.fs.write_bytes(p("scratchpad", "in", "new.csv"), b"x", check=ws.check_write)
    assert info.value.code == PathErrorCode.INPUT_READ_ONLY
    assert not (ws.root / "input" / "new.csv").exists()


def test_no_directory_is_created_in_a_protected_place(ws: Workspace) -> None:
    os.symlink("../src", ws.root / "output" / "code")
    with pytest.raises(WriteProtectedError):
        ws.fs.write_bytes(p("output", "code", "new", "x.py"), b"x", check=ws.check_write)
    assert not (ws.root / "src" / "new").exists()


def test_symlink_at_destination_pointing_out_is_refused(ws: Workspace) -> None:
    os.symlink(ws.root.parent / "sess_2" / "output" / "theirs.txt", ws.root / "output" / "f")
    with pytest.raises(PathEscapeError):
        ws.fs.write_bytes(p("output", "f"), b"mine", check=ws.check_write)
    assert (ws.root.parent / "sess_2" / "output" / "theirs.txt").read_bytes() == SECRET


def test_fifo_and_directory_are_not_read(ws: Workspace) -> None:
    os.mkfifo(ws.root / "scratchpad" / "pipe")
    with pytest.raises(InvalidPathError) as info:
        ws.fs.read_bytes(p("scratchpad", "pipe"))
    assert info.value.code == PathErrorCode.NOT_REGULAR
    with pytest.raises(InvalidPathError) as info:
        ws.fs.read_bytes(p("output"))
    assert info.value.code == PathErrorCode.IS_A_DIRECTORY


def test_missing_and_not_a_directory(ws: Workspace) -> None:
    with pytest.raises(InvalidPathError) as info:
        ws.fs.read_bytes(p("output", "nope", "x"))
    assert info.value.code == PathErrorCode.NOT_FOUND
    with pytest.raises(InvalidPathError) as info:
        ws.fs.read_bytes(p("input", "data.csv", "x"))
    assert info.value.code == PathErrorCode.NOT_A_DIRECTORY


def test_symlink_swapped_in_after_the_check_is_caught(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk lstat()s a regular file; before the open, it becomes a link to a secret."""
    victim = ws.root / "scratchpad" / "f"
    victim.write_bytes(b"harmless")
    real_stat = os.stat

    def swapping_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        result = real_stat(path, *args, **kwargs)  # type: ignore[arg-type]
        if path == "f" and not victim.is_symlink():
            victim.unlink()
            os.symlink(ws.root.parent / "sess_2" / "output" / "theirs.txt", victim)
        return result

    monkeypatch.setattr(fsaccess.os, "stat", swapping_stat)
    with pytest.raises(PathEscapeError) as info:
        ws.fs.read_bytes(p("scratchpad", "f"))
    assert info.value.code == PathErrorCode.SYMLINK_RACE


def test_concurrent_swapping_never_leaks_outside(ws: Workspace) -> None:
    """A thread flips scratchpad/d between a real dir and a link out; reads never see the secret."""
    scratch = ws.root / "scratchpad"
    (scratch / "real").mkdir()
    (scratch / "real" / "secret.txt").write_bytes(b"harmless")
    stop = threading.Event()
    flips = [0]

    def flipper() -> None:
        while not stop.is_set():
            flips[0] += 1
            for kind in ("dir", "link"):
                tmp = scratch / f"tmp_{kind}"
                if kind == "dir":
                    os.symlink("real", tmp)  # an inside link: allowed
                else:
                    os.symlink(ws.root.parent.parent.parent.parent / "outside", tmp)
                os.replace(tmp, scratch / "d")

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    seen: set[bytes] = set()
    try:
        for _ in range(3000):
            try:
                seen.add(ws.fs.read_bytes(p("scratchpad", "d", "secret.txt"))[0])
            except (PathEscapeError, InvalidPathError):
                seen.add(b"refused")
    finally:
        stop.set()
        thread.join()
    assert flips[0] > 0
    assert SECRET not in seen


# ------------------------------------------------------------------------------ random layouts

_NAMES = st.sampled_from(["a", "b", "c", "input", "output", "scratchpad", "src", "d"])
_TOPS = st.sampled_from(["scratchpad", "output", "input", "src", "a"])
_TARGET_PARTS = st.sampled_from(
    ["..", ".", "a", "b", "input", "output", "src", "scratchpad", "secret.txt", "outside"]
    + ["sess_2", "theirs.txt", "data.csv", "app.py"]
)
# Targets that reach real files outside (or inside) when followed: the dangerous cases.
_KNOWN_TARGETS = st.sampled_from(
    [
        "../../../../../outside/secret.txt",
        "../../../../../../outside/secret.txt",
        "../../../sess_2/output/theirs.txt",
        "../../sess_2/output/theirs.txt",
        "../../../sess_2/output",
        "../input/data.csv",
        "../../input/data.csv",
        "../src",
        "../../src/app.py",
        "../../../../../outside",
    ]
)
_REL_TARGETS = st.one_of(_KNOWN_TARGETS, st.lists(_TARGET_PARTS, max_size=7).map("/".join))
_ABS_TARGETS = st.tuples(
    st.sampled_from(["session", "other_session", "outside", "etc", "home"]),
    st.sampled_from(["", "secret.txt", "output/theirs.txt", "output", "input/data.csv", "passwd"]),
)
_QUERY_PARTS = st.sampled_from(
    ["a", "b", "c", "d", "..", ".", "input", "output", "scratch", "src", "x", "secret.txt"]
)


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(kind, path, target) entries anywhere in the session, and query paths that hit them."""
    entries: list[tuple[str, str, str]] = []
    for _ in range(draw(st.integers(1, 8))):
        parts = [draw(_TOPS), *draw(st.lists(_NAMES, max_size=2)), draw(_NAMES)]
        kind = draw(st.sampled_from(["dir", "file", "link", "link", "abslink"]))
        target = ""
        if kind == "link":
            target = draw(_REL_TARGETS) or "."
        elif kind == "abslink":
            base, rel = draw(_ABS_TARGETS)
            target = base + "|" + rel
        entries.append((kind, "/".join(parts), target))
    queries = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            kind, path, _ = draw(st.sampled_from(entries))
            top, _, rest = path.partition("/")
            # Areas are logical roots; other top-level names are reached from the cwd with '..'.
            prefix = top if top in ("scratchpad", "output", "input") else "../" + top
            tail = draw(st.lists(_QUERY_PARTS, max_size=2))
            queries.append("/".join([prefix, rest, *tail]))
        else:
            queries.append("/".join(draw(st.lists(_QUERY_PARTS, min_size=1, max_size=6))))
    return entries, queries


def _build(ws: Workspace, home: Path, entries: list[tuple[str, str, str]]) -> None:
    bases = {
        "session": ws.root,
        "other_session": ws.root.parent / "sess_2",
        "outside": home / "outside",
        "etc": Path("/etc"),
        "home": home,
    }
    for kind, path, target in entries:
        host = ws.root / path
        try:
            host.parent.mkdir(parents=True, exist_ok=True)
            if kind == "dir":
                host.mkdir(exist_ok=True)
            elif kind == "file":
                host.write_bytes(b"inside:" + path.encode())
            elif kind == "link":
                os.symlink(target, host)
            else:
                base, rel = target.split("|")
                rel = "outside/secret.txt" if base == "home" and rel == "secret.txt" else rel
                os.symlink(os.path.join(bases[base], rel), host)
        except OSError:
            continue  # a conflicting earlier entry: the layout is still a valid layout


def _snapshot(root: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            full = Path(dirpath) / name
            if full.is_symlink():
                out[str(full)] = b"->" + os.readlink(full).encode()
            elif full.is_file():
                out[str(full)] = full.read_bytes()
            else:
                out[str(full)] = b"<dir>"
    return out


@pytest.fixture(scope="module")
def shared_home() -> Iterator[Path]:
    """One home per module (on tmpfs when there is one: this property test is file-system bound)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    home = Path(tempfile.mkdtemp(prefix="ws-prop-", dir=base))
    make_shared(home)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def fresh_session(home: Path) -> Iterator[Workspace]:
    ws = make_session(home)
    try:
        yield ws
    finally:
        shutil.rmtree(ws.root)


def _fd_target(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _protected(ws: Workspace, home: Path) -> dict[str, bytes]:
    snap = _snapshot(home / "outside")
    snap.update(_snapshot(ws.root.parent / "sess_2"))
    snap.update(_snapshot(ws.root / "input"))
    if not ws.allow_platform_work:
        snap.update(_snapshot(ws.root / "src"))
    return snap


@settings(
    max_examples=examples(3000),
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(layouts(), st.booleans())
def test_property_random_symlink_layouts_stay_confined(
    shared_home: Path,
    layout: tuple[list[tuple[str, str, str]], list[str]],
    allow_platform: bool,
) -> None:
    home = shared_home
    entries, queries = layout
    with fresh_session(home) as ws:
        ws.allow_platform_work = allow_platform
        _build(ws, home, entries)
        before = _protected(ws, home)
        real_root = os.path.realpath(ws.root)
        for raw in queries:
            try:
                path = ws.resolve(raw)
            except (InvalidPathError, PathEscapeError):
                continue
            for opener in (ws.fs.open_read, ws.fs.open_dir):
                try:
                    fd, _ = opener(path)
                except (InvalidPathError, PathEscapeError):
                    continue
                try:
                    target = _fd_target(fd)
                finally:
                    os.close(fd)
                assert target == real_root or target.startswith(real_root + "/"), (raw, target)
            try:
                written = ws.fs.write_bytes(path, b"agent-wrote", check=ws.check_write)
            except (InvalidPathError, PathEscapeError, WriteProtectedError, OSError):
                continue
            host = os.path.realpath(ws.root.joinpath(*written.parts))
            assert host.startswith(real_root + "/"), (raw, host)
            top = os.path.relpath(host, real_root).split("/")[0]
            assert top != "input"
            if not allow_platform:
                assert top in ("scratchpad", "output"), (raw, host)
        assert _protected(ws, home) == before
