"""From settings to the worker's code sandbox: build it, try it once, say what was decided.

A run-worker calls :func:`prepare_sandbox` at start-up. With ``mode = "bwrap"`` a trial call must
succeed, or the code tools are not offered at all and the reason, with how to fix it, is logged.
With ``mode = "off"`` the worker logs a warning that code runs with the worker's own rights.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent_core.config import SandboxSettings, Settings
from agent_core.tools.sandbox.limits import SandboxLimits
from agent_core.tools.sandbox.runners import BwrapRunner, CodeRunner, DirectRunner, SandboxConfig
from agent_core.tools.sandbox.staging import sweep_stale_stages
from agent_core.tools.workspace import Workspace

__all__ = ["CodeSandbox", "diagnose", "limits_from", "prepare_sandbox", "sandbox_config"]

log = logging.getLogger("soong.sandbox")

_MIB: Final = 1024 * 1024
_SYSTEM_ROOTS: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_PROBE_CODE: Final = "print('sandbox ok')"


@dataclass(frozen=True, slots=True)
class CodeSandbox:
    """What a worker offers for code: a runner (``None``: no code tools), limits, and why."""

    runner: CodeRunner | None
    limits: SandboxLimits
    run_command: bool
    status: str


def limits_from(s: SandboxSettings) -> SandboxLimits:
    """The per-call limits the settings describe."""
    return SandboxLimits(
        timeout_s=s.timeout_s,
        cpu_s=s.cpu_s,
        memory_bytes=s.memory_mb * _MIB,
        file_size_bytes=s.file_size_mb * _MIB,
        max_processes=s.max_processes,
        write_quota_bytes=s.write_quota_mb * _MIB,
        min_free_disk_bytes=s.min_free_disk_mb * _MIB,
        tmp_bytes=s.tmp_mb * _MIB,
        output_cap_bytes=s.output_cap_kb * 1024,
        nice=s.nice,
    )


def _interpreter(s: SandboxSettings) -> tuple[str, str | None]:
    """The interpreter code runs with, and the prefix to show when it lies outside the system
    folders (by default ``python3`` on the sandbox's PATH: the system's, not the worker's)."""
    if "/" not in s.python:
        return s.python, None
    real = os.path.realpath(s.python)
    return real, str(Path(real).parent.parent)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _check_hidden(visible: Sequence[str], hidden: Sequence[Path]) -> None:
    """Refuse a visible path that holds (or lies in) the service's data."""
    for seen in visible:
        real = os.path.realpath(seen)
        for data in hidden:
            secret = os.path.realpath(data)
            if _inside(secret, real) or _inside(real, secret):
                raise ValueError(
                    f"{seen} would show the service's data ({data}) to sandboxed code; "
                    "move the data or the path"
                )


def sandbox_config(settings: Settings) -> SandboxConfig:
    """The runner's configuration; raises ``ValueError`` when it would expose the data."""
    s = settings.sandbox
    python, prefix = _interpreter(s)
    extra = [str(p) for p in s.read_only_paths]
    if prefix is not None and not any(
        _inside(os.path.realpath(prefix), root) for root in _SYSTEM_ROOTS
    ):
        extra.append(prefix)
    if s.mode == "bwrap":
        hidden = [settings.home, settings.db_path.parent]
        _check_hidden([*_SYSTEM_ROOTS, *extra], hidden)
    return SandboxConfig(
        python=python,
        shell=s.shell,
        extra_env=dict(s.env),
        network=s.network,
        allowed_hosts=tuple(s.allowed_hosts),
        read_only_paths=tuple(dict.fromkeys(extra)),
    )


def diagnose(stderr: str, *, bwrap_found: bool) -> str:
    """Why bubblewrap failed, and how to fix it, from what it printed."""
    text = stderr.strip().splitlines()[-1] if stderr.strip() else "no output"
    if not bwrap_found:
        return "bubblewrap is not installed. Fix: apt-get install bubblewrap (or dnf/apk add)."
    if "proc" in stderr and "mount" in stderr.lower():
        return (
            f"bubblewrap cannot mount a private /proc ({text}). Fix: in a container, /proc must "
            "not be masked (docker: security_opt systempaths=unconfined, see docker-compose.yml)."
        )
    if "Permission denied" in stderr and "source path" in stderr:
        return (
            f"the sandbox's user cannot reach the data folder ({text}). Fix: run the worker as a "
            "non-root user, or keep SOONG_AGENT_HOME out of folders only root may enter (/root)."
        )
    if any(s in stderr for s in ("namespace", "uid map", "Operation not permitted")):
        return (
            f"the kernel refuses bubblewrap a user namespace ({text}). Fix: on the host, "
            "sysctl kernel.unprivileged_userns_clone=1 (Debian) or "
            "kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04+); in a container, "
            "allow unshare and mount (docker: security_opt seccomp and apparmor, see "
            "docker-compose.yml)."
        )
    return f"bubblewrap failed ({text}). Check that `bwrap --version` runs for the worker's user."


async def _probe(runner: CodeRunner, limits: SandboxLimits, home: Path) -> str | None:
    """Run a trivial script once in a workspace under ``home`` (where the real ones are);
    ``None`` if it worked, else what failed."""
    (home / "run").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sandbox-probe-", dir=home / "run") as tmp:
        os.chmod(tmp, 0o755)  # as a workspace folder is (mkdtemp makes it 0700)
        workspace = Workspace(tmp, "probe", "probe")
        workspace.ensure()
        try:
            result = await runner.run(
                [runner.config.python, "-I", "-c", _PROBE_CODE], workspace, limits
            )
        except OSError as exc:  # the runner's own programs (nice, prlimit, bwrap) missing
            return f"{type(exc).__name__}: {exc}"
    if result.ok and result.stdout.strip() == "sandbox ok":
        return None
    return result.stderr or f"exit code {result.exit_code}"


async def prepare_sandbox(settings: Settings) -> CodeSandbox:
    """Build the configured runner, try it, and log the decision (see the module docstring)."""
    s = settings.sandbox
    limits = limits_from(s)
    try:
        config = sandbox_config(settings)
    except ValueError as exc:
        log.error("code tools are NOT offered: sandbox.read_only_paths: %s", exc)
        return CodeSandbox(None, limits, False, f"refused: {exc}")
    if s.mode == "off":
        log.warning(
            'SANDBOX OFF (sandbox.mode = "off"): agent code runs as this worker\'s user and can '
            "read every account's files, the databases and this process's environment. "
            "Use it only on a single-user machine."
        )
        return CodeSandbox(DirectRunner(config), limits, s.run_command, "off")
    runner = BwrapRunner(config)
    if swept := sweep_stale_stages():
        log.info("removed %d staging folders of workers that died mid-call", swept)
    failure = await _probe(runner, limits, settings.home)
    if failure is not None:
        found = os.path.isabs(runner.bwrap) and os.access(runner.bwrap, os.X_OK)
        reason = diagnose(failure, bwrap_found=found)
        log.error("code tools (run_python, run_command) are NOT offered: %s", reason)
        return CodeSandbox(None, limits, False, f"unavailable: {reason}")
    if s.network:
        network = "network on (all hosts)"
    elif s.allowed_hosts:
        network = "network only to " + ", ".join(s.allowed_hosts) + " through the worker's proxy"
    else:
        network = "no network"
    log.info("code runs in a bubblewrap sandbox per call (%s)", network)
    return CodeSandbox(runner, limits, s.run_command, "bwrap")
