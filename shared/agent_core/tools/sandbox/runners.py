"""Where code runs: in a bubblewrap sandbox per call, or — an operator's explicit choice — as a
limited subprocess of the worker.

:class:`BwrapRunner` (``docs/architecture.md``, "Walls: sandbox, secrets, paths, bounded input"):
each call gets its own user, PID, IPC, UTS, cgroup and network namespaces; it runs as uid 65534
with no capabilities and cannot create further user namespaces; it sees the system read-only
(``/usr`` and the library folders, a few ``/etc`` files, the interpreter's prefix and whatever
the operator lists), a private ``/proc`` showing only its own processes, a minimal ``/dev``, a
small private ``/tmp``, and of the session's workspace ``/workspace/input`` read-only and
``/workspace/scratchpad`` (its working directory) and ``/workspace/output`` writable — nothing of
other sessions, other accounts, the SQLite files, the memory files or the worker's environment.
Without ``network`` its network namespace holds only its own loopback: no host, not even the
Valkey on the worker's loopback, is reachable — except, with ``allowed_hosts``, the listed ones
through the worker's proxy (:mod:`.proxy`). The areas are bound from directory descriptors
opened without following links, so a path swapped for a link cannot redirect a bind.

A worker running as root starts the sandbox as uid 65534 (see :class:`BwrapRunner`); where that
user may not pass through the folders down to an area, the areas reach bubblewrap through a
staging folder (:mod:`.staging`).

:class:`DirectRunner` is ``sandbox.mode = "off"``: the same limits and scrubbed environment, but
the code runs as the worker's user and can read whatever that user can. It is for a single-user
machine; the worker says so loudly at start-up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Final

from agent_core.tools.paths import Area
from agent_core.tools.sandbox.limits import SandboxLimits
from agent_core.tools.sandbox.process import SandboxResult, WriteWatch, run_limited
from agent_core.tools.sandbox.proxy import (
    PROXY_SOCKET,
    RELAY_CODE,
    HostProxy,
    HostRules,
    proxy_environment,
)
from agent_core.tools.sandbox.staging import (
    PROJECT,
    SANDBOX_UID,
    STAGE_SCRIPT,
    STAGED_AREAS,
    all_passable,
    stage_folder,
    sweep_stale_stages,
)
from agent_core.tools.workspace import Workspace

__all__ = [
    "SANDBOX_UID",
    "SANDBOX_WORKSPACE",
    "BwrapRunner",
    "CodeRunner",
    "DirectRunner",
    "SandboxConfig",
    "sweep_stale_stages",
]

SANDBOX_WORKSPACE: Final = "/workspace"

# Read-only views of the host system (a link, as in a merged-/usr layout, is recreated as a link).
_SYSTEM_DIRS: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The /etc files programs need to run; never the whole of /etc (no shadow, no host secrets).
_ETC: Final = (
    "alternatives", "ca-certificates", "ca-certificates.conf", "fonts", "gai.conf", "group",
    "host.conf", "hostname", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
    "mime.types", "nsswitch.conf", "os-release", "passwd", "protocols", "resolv.conf", "services",
    "ssl", "timezone",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """How code is started: built from settings once, never from ``os.environ``.

    ``extra_env`` is what the operator deliberately gives code (e.g. ``MPLBACKEND=Agg``); nothing
    of the worker's own environment is ever passed on.
    """

    python: str = "python3"  # a name is looked up on ``path_env`` inside the sandbox
    shell: str = "/bin/sh"
    path_env: str = "/usr/local/bin:/usr/bin:/bin"
    lang: str = "C.UTF-8"
    extra_env: Mapping[str, str] = field(default_factory=dict)
    network: bool = False
    allowed_hosts: Sequence[str] = ()  # through the proxy; only without ``network``
    read_only_paths: Sequence[str] = ()

    def environment(self, *, home: str, tmp: str) -> dict[str, str]:
        """The command's whole environment: an allow-list, nothing inherited."""
        env = {
            "PATH": self.path_env,
            "LANG": self.lang,
            "LC_ALL": self.lang,
            "HOME": home,
            "TMPDIR": tmp,
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update(self.extra_env)
        return env


class CodeRunner(ABC):
    """Runs one command for a session: working directory ``scratchpad/``, limits, no secrets."""

    mode: ClassVar[str]

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config

    @abstractmethod
    async def run(
        self, command: Sequence[str], workspace: Workspace, limits: SandboxLimits
    ) -> SandboxResult:
        """Run ``command`` to its end or its first limit; the command's failures are results."""

    async def close(self) -> None:
        """Release what the runner holds between calls (the worker calls it at stop)."""
        return None  # a runner that holds nothing between calls has nothing to release

    @staticmethod
    def _watch(workspace: Workspace, limits: SandboxLimits) -> WriteWatch:
        areas = (workspace.area_dir(Area.SCRATCHPAD), workspace.area_dir(Area.OUTPUT))
        return WriteWatch(areas, limits)


def _tool(name: str) -> str:
    return shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin") or name


class DirectRunner(CodeRunner):
    """``sandbox.mode = "off"``: a limited subprocess of the worker (see the module docstring)."""

    mode = "off"

    async def run(
        self, command: Sequence[str], workspace: Workspace, limits: SandboxLimits
    ) -> SandboxResult:
        """Run with kernel limits (no process limit: it would count the worker's user)."""
        scratch = workspace.area_dir(Area.SCRATCHPAD)
        argv = [
            _tool("nice"), "-n", str(limits.nice),
            _tool("prlimit"), *limits.prlimit_args(nproc=False), "--", *command,
        ]  # fmt: skip
        env = self.config.environment(home=str(scratch), tmp=str(scratch))
        return await run_limited(
            argv, env=env, limits=limits, cwd=scratch, watch=self._watch(workspace, limits)
        )


@contextlib.contextmanager
def _area_fds(workspace: Workspace) -> Iterator[dict[Area | str, int]]:
    """``O_PATH`` descriptors of the three areas, opened without following a link, and of the
    session's project folder when it has one (a folder the server resolved: see
    ``Workspace.use_project``)."""
    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    fds: dict[Area | str, int] = {}
    root = os.open(workspace.root, flags)
    try:
        for area in Area:
            fds[area] = os.open(area.value, flags | os.O_NOFOLLOW, dir_fd=root)
        if workspace.project is not None:
            fds[PROJECT] = os.open(workspace.project, flags | os.O_NOFOLLOW)
        yield fds
    finally:
        os.close(root)
        for fd in fds.values():
            os.close(fd)


def _give_areas(workspace: Workspace) -> None:
    """The writable areas to the sandbox's user (a root worker only; links never followed)."""
    for area in (Area.SCRATCHPAD, Area.OUTPUT):
        path = workspace.area_dir(area)
        if os.lstat(path).st_uid != SANDBOX_UID:
            os.lchown(path, SANDBOX_UID, SANDBOX_UID)


def _area_binds(
    fds: Mapping[Area | str, int], stage: str | None, project: list[str]
) -> tuple[list[str], list[str]]:
    """bubblewrap's binds of the call's areas, and what runs before bubblewrap: nothing when it
    binds them straight from the descriptors ``fds``; with ``stage`` (a root worker), a mount
    namespace of the call's own that binds them onto ``stage`` first (``STAGE_SCRIPT``).
    ``project``: ``[]`` when the session has no project, else its bind option."""
    ws = SANDBOX_WORKSPACE
    if stage is None:
        binds = [
            "--ro-bind-fd", str(fds[Area.INPUT]), f"{ws}/input",
            "--bind-fd", str(fds[Area.SCRATCHPAD]), f"{ws}/scratchpad",
            "--bind-fd", str(fds[Area.OUTPUT]), f"{ws}/output",
        ]  # fmt: skip
        if project:
            binds += [f"{project[0]}-fd", str(fds[PROJECT]), f"{ws}/{PROJECT}"]
        prelude: list[str] = []
    else:
        binds = [
            "--ro-bind", f"{stage}/input", f"{ws}/input",
            "--bind", f"{stage}/scratchpad", f"{ws}/scratchpad",
            "--bind", f"{stage}/output", f"{ws}/output",
        ]  # fmt: skip
        staged: list[Area | str] = [*STAGED_AREAS, *([PROJECT] if project else [])]
        if project:
            binds += [project[0], f"{stage}/{PROJECT}", f"{ws}/{PROJECT}"]
        prelude = [
            _tool("unshare"), "--mount", "--propagation", "private", "--",
            _tool("sh"), "-c", STAGE_SCRIPT, "sh", stage,
            " ".join(a.value if isinstance(a, Area) else a for a in staged),
            *(str(fds[area]) for area in staged),
        ]  # fmt: skip
    return binds, prelude


class BwrapRunner(CodeRunner):
    """A bubblewrap sandbox per call (see the module docstring).

    A worker running as root starts bubblewrap as uid 65534: the kernel counts a process limit
    only for a non-root user, so the sandbox must not be root even outside its namespace. The
    writable areas then belong to that user (and what the worker's file tools create there too,
    see ``fsaccess``); where that user could not reach them by their path, they reach
    bubblewrap through a staging folder (see :mod:`.staging`), so the home may lie anywhere,
    also below a ``/root`` of mode 0700.
    """

    mode = "bwrap"

    def __init__(self, config: SandboxConfig, *, bwrap: str | None = None) -> None:
        super().__init__(config)
        self.bwrap = bwrap or _tool("bwrap")
        self._system = self._system_args()
        hosts = () if config.network else tuple(config.allowed_hosts)
        self.proxy = HostProxy(HostRules.of(hosts)) if hosts else None

    def _system_args(self) -> list[str]:
        args: list[str] = []
        for path in _SYSTEM_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for name in _ETC:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        for path in self.config.read_only_paths:
            args += ["--ro-bind", path, path]
        return args

    def argv(
        self,
        command: Sequence[str],
        limits: SandboxLimits,
        fds: Mapping[Area | str, int],
        proxy_socket: str | None = None,
        stage: str | None = None,
        *,
        project_writable: bool = False,
    ) -> list[str]:
        """The whole command line: ``nice``, ``bwrap`` and its options, ``prlimit``, the command
        (behind the proxy's relay when ``proxy_socket`` is given). With ``stage`` (a root
        worker), the areas are bound onto it first in a mount namespace of the call's own and
        bubblewrap binds them from there; otherwise straight from the descriptors.

        It holds no secret: the environment reaches the command through bwrap's own, not as
        ``--setenv`` arguments that any local user could read in the process list.
        """
        proxy: list[str] = []
        relay: list[str] = []
        if proxy_socket is not None:
            proxy = ["--ro-bind", proxy_socket, PROXY_SOCKET]
            relay = [self.config.python, "-I", "-S", "-c", RELAY_CODE]
        ws = SANDBOX_WORKSPACE
        uid = str(SANDBOX_UID)
        # A root worker starts bubblewrap as the sandbox's user (setpriv: uvloop's subprocess
        # takes no user/group arguments); bubblewrap sets its parent-death signal after that.
        drop = (
            [_tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
            if os.geteuid() == 0
            else []
        )
        # The project is read-only unless the session asked for work on it (as for the file
        # tools, ``paths.ensure_writable``).
        project = ["--bind" if project_writable else "--ro-bind"] if PROJECT in fds else []
        binds, prelude = _area_binds(fds, stage, project)
        return [
            *prelude,
            *drop,
            _tool("nice"), "-n", str(limits.nice), self.bwrap,
            "--unshare-all", *(["--share-net"] if self.config.network else []),
            "--unshare-user", "--disable-userns", "--uid", uid, "--gid", uid,
            "--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            *self._system,
            "--proc", "/proc", "--dev", "/dev",
            "--size", str(limits.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp",
            "--dir", ws,
            *binds,
            *proxy,
            "--remount-ro", "/",
            "--chdir", f"{ws}/scratchpad",
            "--", _tool("prlimit"), *limits.prlimit_args(nproc=True), "--", *relay, *command,
        ]  # fmt: skip

    async def close(self) -> None:
        """Stop the proxy, if there is one (its socket and folder go with it)."""
        if self.proxy is not None:
            await self.proxy.close()

    async def run(
        self, command: Sequence[str], workspace: Workspace, limits: SandboxLimits
    ) -> SandboxResult:
        """Run in a fresh sandbox; its namespaces die with the call."""
        env = self.config.environment(home=f"{SANDBOX_WORKSPACE}/scratchpad", tmp="/tmp")
        socket_path = None
        if self.proxy is not None:
            socket_path = await self.proxy.start()
            env.update(proxy_environment())
        root = os.geteuid() == 0
        if root:
            _give_areas(workspace)
        with contextlib.ExitStack() as held:
            fds = held.enter_context(_area_fds(workspace))
            stage = None
            if root and not all_passable(fds.values()):
                stage = held.enter_context(stage_folder())
            result = await run_limited(
                self.argv(
                    command,
                    limits,
                    fds,
                    socket_path,
                    stage,
                    project_writable=workspace.allow_platform_work,
                ),
                env=env,
                limits=limits,
                watch=self._watch(workspace, limits),
                pass_fds=list(fds.values()),
            )
        code = result.exit_code
        if code is not None and 128 < code <= 128 + 64:
            # bwrap reports a command killed by signal N as 128 + N, as shells do (a command
            # that exits with such a code itself reads the same).
            return replace(result, exit_code=128 - code)
        return result
