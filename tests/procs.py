"""Service processes for tests, forked from a server that has already imported the services.

A test that needs a storage-writer or run-workers as real processes (to kill one, to stop one,
to see what survives) used to start each with ``python -m agent_core.cli serve``: about two
seconds of CPU per process to import the services before the first line of the test's work, some
fifty clusters of three per suite. Here they come from one ``multiprocessing`` fork server per
pytest process, which imports the services once (``PRELOAD``); each service is a fork of it that
runs exactly what ``soong-agent serve NAME`` runs (:func:`agent_core.cli.main`), with its own
environment, working directory and log file, in its own process (its own pid, signals, exit
code, children).

What differs from a fresh interpreter, and why no test here depends on it: the process's parent
is the fork server (not the test), its ``/proc/PID/environ`` is the server's (the service reads
``os.environ``, which is set before ``main`` runs), and modules are imported before the
environment is set (none of ours reads the environment at import). What the interpreter itself
reads at start-up cannot be set after the fork: a service given a ``PYTHONPATH`` of its own (a
plug-in installed beside the runtime) is started as a fresh ``python -m agent_core.cli`` instead,
as are the tests of the command line's start-up itself (``up``'s start-up errors).

:func:`run_cli` runs one short command (``soong-agent assistants list``, ``chat`` fed from a
string) to its end the same way: what ``subprocess.run`` of ``python -m agent_core.cli`` returns
(exit code, standard output and error as text), without an interpreter's start-up per call.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Protocol

__all__ = ["PRELOAD", "ServiceProcess", "run_cli", "spawn_service"]


class ServiceProcess(Protocol):
    """The part of :class:`subprocess.Popen` the tests use on a service process."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...


# What every service process imports: the command line and each service's module, and the
# OpenAI adapter the tests' workers build at start-up for their default model (the fakes speak
# OpenAI's protocol): the SDK takes seconds of CPU to import, once here instead of per worker.
PRELOAD = [
    "agent_core.cli",
    "agent_core.provider.openai_adapter",
    "services.stack.commands",
    "services.stack.registry",
    "services.run_worker.service",
    "services.storage_writer.service",
    "services.task_wal.service",
    "services.memory_extraction.service",
]

_context: ForkServerContext | None = None


def _server() -> ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        assert isinstance(context, ForkServerContext)
        context.set_forkserver_preload(PRELOAD)
        _context = context
    return _context


def _serve(argv: list[str], env: dict[str, str], cwd: str, log: str) -> None:
    """The child: the test's environment, working directory and log, then ``soong-agent``."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    _exit_with_cli(argv, env, cwd)


class _Forked:
    """A service process forked from the server: a :class:`ServiceProcess`."""

    def __init__(self, process: multiprocessing.process.BaseProcess, argv: list[str]) -> None:
        self._process = process
        self.args = argv

    @property
    def pid(self) -> int:
        pid = self._process.pid
        assert pid is not None
        return pid

    @property
    def returncode(self) -> int | None:
        """The exit code once it has ended (``-N`` for signal N), else ``None``."""
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code; :class:`subprocess.TimeoutExpired` if it runs on past ``timeout``."""
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self._process.terminate()

    def kill(self) -> None:
        self._process.kill()


def spawn_service(
    name: str, instance: str, *, env: dict[str, str], cwd: Path, log: Path
) -> ServiceProcess:
    """Start ``soong-agent serve NAME --instance INSTANCE`` as a fork of the preloaded server
    (or, see the module docstring, a fresh interpreter), its output appended to ``log``."""
    argv = ["serve", name, "--instance", instance]
    if env.get("PYTHONPATH") != os.environ.get("PYTHONPATH"):  # read only at interpreter start
        with log.open("ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "agent_core.cli", *argv],
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
    process = _server().Process(
        target=_serve,
        args=(argv, dict(env), str(cwd), str(log)),
        name=f"{name}-{instance}",
        daemon=True,  # ended with the test process if a test leaves one behind
    )
    process.start()
    return _Forked(process, argv)


def _run(argv: list[str], env: dict[str, str], cwd: str, files: tuple[str, str, str]) -> None:
    """The child of :func:`run_cli`: standard input, output and error from and to ``files``."""
    stdin, stdout, stderr = files
    for fd, path, flags in (
        (0, stdin, os.O_RDONLY),
        (1, stdout, os.O_WRONLY | os.O_TRUNC),
        (2, stderr, os.O_WRONLY | os.O_TRUNC),
    ):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    # multiprocessing gave the child /dev/null as its ``sys.stdin``: the command reads fd 0
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's own
    _exit_with_cli(argv, env, cwd)


def _exit_with_cli(argv: list[str], env: dict[str, str], cwd: str) -> None:
    """The end of both children: the test's environment and working directory, then
    ``soong-agent argv``, exiting with its code."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    from agent_core.cli import main

    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


def run_cli(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    input: str = "",
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``soong-agent ARGV`` with ``input`` on its standard input, run to its end as a fork of the
    preloaded server (or a fresh interpreter, as :func:`spawn_service` decides): its exit code
    and output. :class:`subprocess.TimeoutExpired` (the process killed) past ``timeout``."""
    args = [sys.executable, "-m", "agent_core.cli", *argv]
    if env.get("PYTHONPATH") != os.environ.get("PYTHONPATH"):
        return subprocess.run(
            args, input=input, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
    with tempfile.TemporaryDirectory(prefix="cli-") as folder:
        files = tuple(str(Path(folder) / name) for name in ("stdin", "stdout", "stderr"))
        for path, text in zip(files, (input, "", ""), strict=True):
            Path(path).write_text(text, encoding="utf-8")
        process = _server().Process(
            target=_run, args=(list(argv), dict(env), str(cwd), files), daemon=True
        )
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(args, timeout)
        out, err = (Path(path).read_text(encoding="utf-8", errors="replace") for path in files[1:])
    return subprocess.CompletedProcess(args, process.exitcode, out, err)
