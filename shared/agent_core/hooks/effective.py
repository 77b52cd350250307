"""Which hooks are in effect for a session: the operator's, then its project's trusted file.

The operator's hooks (``[hooks]`` in config.toml) apply to every session. A session's project
may add its own in ``<project>/.soong-agent/hooks.toml`` — read only when the project folder and
the file (links resolved) lie at or below one of ``hooks.trusted_project_roots``, never for a
session working in its own workspace (agents write there). A project file that cannot be used
(not TOML, an unknown key, a bad entry, over :data:`MAX_FILE_BYTES`) raises :class:`ConfigError`
naming the file and the entry: a broken guard must not quietly stop guarding. Files are parsed
once per (path, size, mtime).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, ValidationError

from agent_core.config.hooks import Hook, HookEntries, HooksSettings, hooks_of
from agent_core.errors import ConfigError, redact
from agent_core.hooks.pipeline import HookSet

__all__ = [
    "MAX_FILE_BYTES",
    "PROJECT_FILE",
    "HookInfo",
    "HookList",
    "HooksInEffect",
    "describe",
]

PROJECT_FILE: Final = Path(".soong-agent") / "hooks.toml"
MAX_FILE_BYTES: Final = 256 * 1024
_CACHE_SIZE: Final = 256


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


class HooksInEffect:
    """The operator's hooks and the reading of trusted project files (one per process)."""

    def __init__(self, settings: HooksSettings) -> None:
        self.operator: tuple[Hook, ...] = tuple(hooks_of(settings, "operator"))
        self._trusted = tuple(os.path.realpath(r) for r in settings.trusted_project_roots)
        self._files: dict[str, tuple[tuple[int, int], tuple[Hook, ...]]] = {}
        self._operator_set = HookSet(self.operator)

    def project_file(self, project: Path | None) -> Path | None:
        """The hooks file a session in ``project`` may have (``None``: no project, or not
        under a trusted root — then no file is read at all)."""
        if project is None or not self._trusted:
            return None
        real = os.path.realpath(project)
        if not _inside(real, self._trusted):
            return None
        # The file itself, once links are resolved, must lie under a trusted root too: a link
        # into a folder agents write (a workspace) would hand them the hooks.
        file = os.path.realpath(os.path.join(real, PROJECT_FILE))
        return Path(file) if _inside(file, self._trusted) else None

    def for_project(self, project: Path | None) -> HookSet:
        """The hooks in effect for a session whose project folder is ``project`` (``None``:
        its own workspace). Raises :class:`ConfigError` for a project file that cannot be used."""
        file = self.project_file(project)
        if file is None:
            return self._operator_set
        own = self._read(file)
        return HookSet((*self.operator, *own)) if own else self._operator_set

    def _read(self, file: Path) -> tuple[Hook, ...]:
        try:
            st = file.stat()
        except FileNotFoundError:
            return ()
        except OSError as exc:
            raise _unusable(file, f"cannot be read ({type(exc).__name__})") from exc
        key = (st.st_size, st.st_mtime_ns)
        cached = self._files.get(str(file))
        if cached is not None and cached[0] == key:
            return cached[1]
        if st.st_size > MAX_FILE_BYTES:
            raise _unusable(file, f"is larger than {MAX_FILE_BYTES} bytes")
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            raise _unusable(file, f"is not valid TOML: {exc}") from exc
        try:
            entries = HookEntries.model_validate(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "(file)"
            message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
            raise _unusable(file, f"{where}: {message}") from exc
        hooks = tuple(hooks_of(entries, "project"))
        if len(self._files) >= _CACHE_SIZE:
            self._files.clear()
        self._files[str(file)] = (key, hooks)
        return hooks


def _unusable(file: Path, why: str) -> ConfigError:
    return ConfigError(
        "invalid_hooks", f"project hooks file {file} {why}", details={"file": str(file)}
    )


class HookInfo(BaseModel):
    """One hook in effect, as the API lists it: a project's with its command (redacted), the
    operator's without (``command`` ``None``: its scripts and their paths are the deployment's,
    not for every account to read)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    event: str
    source: str
    matcher: str | None
    command: list[str] | str | None
    shell: bool
    timeout_s: float
    on_error: str
    agents: list[str] | None


class HookList(BaseModel):
    """``GET /v1/sessions/{id}/hooks``: the hooks in effect, in the order they run per event;
    ``project_file`` when the session's project has a trusted file, ``problem`` when that file
    cannot be used (its runs then fail with ``invalid_hooks``)."""

    model_config = ConfigDict(extra="forbid")

    items: list[HookInfo]
    project_file: str | None = None
    problem: str | None = None


def describe(hooks: tuple[Hook, ...] | list[Hook]) -> list[HookInfo]:
    """The API's view of ``hooks``: the operator's without their commands; a project's with
    theirs, secrets (tokens, passwords) redacted."""
    items = []
    for hook in hooks:
        spec = hook.spec
        command: list[str] | str | None
        if hook.source == "operator":
            command = None
        elif isinstance(spec.command, str):
            command = redact(spec.command)
        else:
            command = [redact(p) for p in spec.command]
        items.append(
            HookInfo(
                name=hook.name,
                event=hook.event,
                source=hook.source,
                matcher=spec.matcher,
                command=command,
                shell=spec.shell,
                timeout_s=spec.timeout_s,
                on_error=hook.on_error,
                agents=None if spec.agents is None else list(spec.agents),
            )
        )
    return items
