"""How a root worker's areas reach its sandbox: straight from their descriptors, or staged.

A worker running as root starts the sandbox as uid 65534 (see ``BwrapRunner`` in
:mod:`.runners`), and bubblewrap resolves every bind source by its path as that user, a
``--bind-fd`` too (through ``/proc/self/fd``). So that user must be able to pass through every
folder from ``/`` down to an area; a home below a folder only root may enter (``/root``, any
``mktemp -d``) is out of its reach. :func:`_passable` answers from each folder's mode bits
(owner, then group, then others, as the kernel reads them); a folder with any access ACL counts
as not passable (its entries are not read), and so does one ``os.stat`` fails on (e.g. gone).
A wrong "yes" would fail the call, a wrong "no" only costs a staging, which always works: every
doubt answers no. The areas of a call share the workspace root's ancestors, so a call reads
each folder once (:func:`all_passable`).

Where an area is not passable, the root worker stages: it binds the areas onto an empty folder
under ``/tmp`` (:func:`stage_folder`) in a mount namespace of the call's own (``unshare --mount``,
private propagation: the host never sees these mounts, and they die with the call), and
bubblewrap binds them from there, so the home may lie anywhere. That costs processes
(``unshare``, a shell, a ``mount`` per area: about 9 ms a call here), so it is done only where
needed; elsewhere bubblewrap binds the descriptors itself. The staging stays one process all
along (:data:`STAGE_SCRIPT`: each step replaces itself with the next): a first bubblewrap run
as root would do the mounts for less, but it forks a monitor that outlives a SIGKILLed worker,
and the sandbox's bubblewrap, its child, would not notice the worker's death.

A SIGKILL skips a staging folder's removal: :func:`sweep_stale_stages` removes those of dead
workers at the next worker's start.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from typing import Final

from agent_core.tools.paths import Area

__all__ = [
    "PROJECT",
    "SANDBOX_UID",
    "STAGED_AREAS",
    "STAGE_SCRIPT",
    "all_passable",
    "stage_folder",
    "sweep_stale_stages",
]

SANDBOX_UID: Final = 65534  # "nobody": no file on the host belongs to it
STAGED_AREAS: Final = (Area.INPUT, Area.SCRATCHPAD, Area.OUTPUT)
# Run as root in the call's own mount namespace: bind each area's descriptor onto the staging
# folder, then become the sandbox (setpriv, nice, bwrap: one process all along, so the worker's
# kill and limits reach it, and bwrap's --die-with-parent watches the worker itself). Paths and
# descriptors arrive as arguments, never spliced into code.
STAGE_SCRIPT: Final = (
    "set -e; stage=$1; areas=$2; shift 2; for area in $areas; do "
    'mount --bind "/proc/self/fd/$1" "$stage/$area"; shift; done; exec "$@"'
)
# The session's project folder, when it has one: at /workspace/project (see ``Workspace``).
PROJECT: Final = "project"
_STAGE_NAMES: Final = (*(a.value for a in STAGED_AREAS), PROJECT)
_STAGE_PREFIX: Final = "soong-stage-"


def all_passable(fds: Iterable[int]) -> bool:
    """Whether every folder ``fds`` name is passable (:func:`_passable`): one call's areas, whose
    paths share the workspace root's ancestors, each folder read once."""
    seen: dict[str, bool] = {}
    return all(_passable(fd, seen) for fd in fds)


def _passable(fd: int, seen: dict[str, bool] | None = None) -> bool:
    """Whether the sandbox's user (uid and gid 65534, no other group) may pass through every
    folder from ``/`` down to the one ``fd`` names, by the mode bits that apply to it (owner,
    then group, then others, as the kernel reads them). A folder with an access ACL counts as
    not passable, its entries unread: the answer errs only towards staging, which always works.
    bubblewrap resolves a ``--bind-fd`` through the folder's path (``/proc/self/fd``), as the
    user it runs as; a folder that answers yes needs no staging.

    ``seen`` holds each folder's own answer by path, read on first need and reused after: one
    dict for the areas of one call (the answers are the same as for each area alone), a fresh
    one for each call, since a folder's mode or ACL may change between calls."""
    answers: dict[str, bool] = {} if seen is None else seen
    path = os.readlink(f"/proc/self/fd/{fd}")
    folder = "/"
    for part in ("", *path.strip("/").split("/")):
        folder = os.path.join(folder, part)
        searchable = answers.get(folder)
        if searchable is None:
            searchable = answers[folder] = _searchable(folder)
        if not searchable:
            return False
    return True


def _searchable(folder: str) -> bool:
    """Whether the sandbox's user may search ``folder`` itself (see :func:`_passable`)."""
    try:
        st = os.stat(folder)
    except OSError:  # e.g. removed while open ("... (deleted)"): staging will report it
        return False
    if st.st_uid == SANDBOX_UID:
        bit = stat.S_IXUSR
    elif st.st_gid == SANDBOX_UID:
        bit = stat.S_IXGRP
    else:
        bit = stat.S_IXOTH
    return bool(st.st_mode & bit) and not _has_acl(folder)


def _has_acl(folder: str) -> bool:
    try:
        os.getxattr(folder, "system.posix_acl_access")
    except OSError:  # ENODATA: none; ENOTSUP: the file system keeps none
        return False
    return True


def sweep_stale_stages(tmp: str | None = None) -> int:
    """Remove the staging folders of workers that died mid-call (a SIGKILL skips the cleanup);
    how many. A folder's name carries its worker's pid; only empty mount points are removed
    (the mounts themselves died with the call's namespace), never anything with content."""
    root = tmp or tempfile.gettempdir()
    removed = 0
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            if not name.startswith(_STAGE_PREFIX):
                continue
            pid = name[len(_STAGE_PREFIX) :].split("-", 1)[0]
            if not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
                continue  # a live worker's (or a name of an older version: left as it is)
            stage = os.path.join(root, name)
            with contextlib.suppress(OSError):
                for area in _STAGE_NAMES:
                    with contextlib.suppress(FileNotFoundError):
                        os.rmdir(os.path.join(stage, area))
                os.rmdir(stage)
                removed += 1
    return removed


@contextlib.contextmanager
def stage_folder() -> Iterator[str]:
    """An empty folder per call under ``/tmp`` (which every user may pass through) with an
    empty mount point per area, removed afterwards; only the call's namespace mounts onto it.
    Its name carries this worker's pid (see :func:`sweep_stale_stages`)."""
    stage = tempfile.mkdtemp(prefix=f"{_STAGE_PREFIX}{os.getpid()}-")
    try:
        os.chmod(stage, 0o755)
        for name in _STAGE_NAMES:
            os.mkdir(os.path.join(stage, name), 0o755)
        yield stage
    finally:
        for name in _STAGE_NAMES:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(stage, name))
        with contextlib.suppress(OSError):
            os.rmdir(stage)
