"""Which session folders the sandbox's user (uid and gid 65534) may reach by their path: the mode
bits that apply to that user, folder by folder from ``/``, as the kernel reads them; an access
ACL anywhere means "stage" (its entries are not read). A wrong yes would fail the call, a wrong
no only costs the staging, so every doubt answers no. One call's areas share their ancestors:
each folder is read once per call, with the answers of each area checked alone."""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_core.tools.sandbox.staging import SANDBOX_UID, _passable, all_passable

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="chown to uid 65534 needs root")


@pytest.fixture
def base(request: pytest.FixtureRequest) -> Path:
    """A folder under the system's /tmp (pytest's own tmp_path lies below a 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="soong-passable-"))
    folder.chmod(0o711)
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    return folder


@contextlib.contextmanager
def _fd(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_PATH | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


def _answer(path: Path) -> bool:
    with _fd(path) as fd:
        return _passable(fd)


def _folder(parent: Path, mode: int, uid: int = -1, gid: int = -1) -> Path:
    folder = parent / f"m{mode:o}-{uid}-{gid}"
    folder.mkdir()
    os.chown(folder, uid, gid)
    folder.chmod(mode)
    return folder


def test_a_folder_others_may_search_is_passable_and_one_they_may_not_is_not(base: Path) -> None:
    assert _answer(_folder(base, 0o711)) is True
    assert _answer(_folder(base, 0o700)) is False
    assert _answer(_folder(base, 0o754)) is False  # read, but no search: not passable


def test_one_closed_folder_on_the_way_closes_everything_below_it(base: Path) -> None:
    closed = _folder(base, 0o700)
    below = _folder(closed, 0o777)
    assert _answer(below) is False
    closed.chmod(0o701)
    assert _answer(below) is True


@root_only
def test_the_owner_bits_decide_for_the_sandbox_user_s_own_folder(base: Path) -> None:
    assert _answer(_folder(base, 0o700, uid=SANDBOX_UID)) is True
    # Its owner's bits apply, not the others' (the kernel never falls through to them).
    assert _answer(_folder(base, 0o071, uid=SANDBOX_UID)) is False


@root_only
def test_the_group_bits_decide_for_a_folder_of_the_sandbox_user_s_group(base: Path) -> None:
    assert _answer(_folder(base, 0o710, gid=SANDBOX_UID)) is True
    assert _answer(_folder(base, 0o701, gid=SANDBOX_UID)) is False


def _acl_user_entry(folder: Path, uid: int) -> bool:
    """Give ``folder`` an access ACL with a named user (version 2 of the kernel's xattr layout:
    a header, then tag/perm/id entries); False where the file system keeps no ACLs."""
    entries = [(0x01, 7, 0xFFFFFFFF), (0x02, 1, uid), (0x04, 5, 0xFFFFFFFF),
               (0x10, 5, 0xFFFFFFFF), (0x20, 1, 0xFFFFFFFF)]  # fmt: skip
    blob = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    try:
        os.setxattr(folder, "system.posix_acl_access", blob)
    except OSError:
        return False
    return True


def test_a_folder_with_an_access_acl_is_not_called_passable(base: Path) -> None:
    folder = _folder(base, 0o711)
    if not _acl_user_entry(folder, 4242):
        pytest.skip("this file system keeps no POSIX ACLs")
    assert folder.stat().st_mode & 0o001  # the mode alone would say yes
    assert _answer(folder) is False


def test_a_folder_removed_while_open_is_not_passable(base: Path) -> None:
    folder = _folder(base, 0o711)
    with _fd(folder) as fd:
        folder.rmdir()
        assert _passable(fd) is False


def _count_stats(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each path is stat-ed from now on (the real ``os.stat`` answers)."""
    counted: Counter[str] = Counter()
    real = os.stat

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        counted[os.fsdecode(path)] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    return counted


def test_one_call_reads_each_folder_once_and_answers_as_each_area_alone(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _folder(base, 0o711)
    areas = [home / "input", home / "scratchpad", home / "output"]
    for area, mode in zip(areas, (0o755, 0o700, 0o711), strict=True):
        area.mkdir()
        area.chmod(mode)
    closed = _folder(base, 0o700)
    project = _folder(closed, 0o777)  # outside the home, below a folder closed to the sandbox
    shared = os.path.realpath(home)  # an ancestor of the three areas: read 3 times alone
    with contextlib.ExitStack() as held:
        fds = [held.enter_context(_fd(p)) for p in (*areas, project)]
        stats = _count_stats(monkeypatch)
        alone = [_passable(fd) for fd in fds]
        assert alone == [True, False, True, False]
        assert stats["/"] == 4 and stats[shared] == 3

        stats.clear()
        seen: dict[str, bool] = {}
        assert [_passable(fd, seen) for fd in fds] == alone
        assert stats["/"] == 1 and stats[shared] == 1
        assert set(stats.values()) == {1}

        stats.clear()
        assert all_passable(fds) is False  # stops at the closed scratchpad
        assert set(stats.values()) == {1}

        areas[1].chmod(0o711)
        closed.chmod(0o701)
        stats.clear()
        assert [_passable(fd) for fd in fds] == [True] * 4
        stats.clear()
        assert all_passable(fds) is True
        assert set(stats.values()) == {1}
        assert set(stats) >= {"/", shared, *(os.path.realpath(p) for p in (*areas, project))}
