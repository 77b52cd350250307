"""Finding skills: the folders searched, in precedence order, and one bounded scan of each.

Folders (``docs/architecture.md``, "Skills"), earlier ones winning a name collision:

1. each folder of ``[skills] dirs`` in config.toml, in the order given (the operator's);
2. ``<home>/accounts/<account>/skills/`` (the account's own);
3. ``<project>/.soong-agent/skills/`` (the session's project: its workspace, or a folder under a
   project root the operator configured).

A skill is ``<folder>/<name>/SKILL.md``. A skill folder or a ``SKILL.md`` that is a symbolic link
is refused (a link could lead a project's skill out of its project); only a configured folder
itself may be a link. Files are read with bounded sizes, and a file unchanged since the last
scan (same inode, size and modification time) is not parsed again.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from agent_core.recent import Recent
from agent_core.skills.frontmatter import parse_skill
from agent_core.skills.model import (
    Skill,
    SkillList,
    SkillProblem,
    SkillProblemCode,
    SkillSource,
    valid_skill_name,
)

__all__ = [
    "MAX_SKILLS_PER_FOLDER",
    "MAX_SKILL_BYTES",
    "SkillCatalog",
    "SkillFolder",
    "scan_skills",
    "skill_folders",
]

log = logging.getLogger("soong.skills")

MAX_SKILL_BYTES: Final = 64 * 1024  # one SKILL.md, frontmatter and body
MAX_SKILLS_PER_FOLDER: Final = 200
_MAX_ENTRIES: Final = 2000  # entries of one folder looked at, skills or not
_CACHE_SIZE: Final = 4096
_OPEN_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class SkillFolder:
    """One folder searched for skills, and who it belongs to."""

    source: SkillSource
    path: Path


def skill_folders(
    *,
    home: Path,
    account_id: str,
    project: Path | None,
    operator_dirs: Sequence[Path] = (),
) -> list[SkillFolder]:
    """The folders searched for one account's session, in precedence order."""
    folders = [SkillFolder(SkillSource.OPERATOR, Path(p)) for p in operator_dirs]
    folders.append(SkillFolder(SkillSource.USER, home / "accounts" / account_id / "skills"))
    if project is not None:
        folders.append(SkillFolder(SkillSource.PROJECT, project / ".soong-agent" / "skills"))
    return folders


@dataclass(frozen=True)
class SkillCatalog:
    """The skills in effect (by name, in precedence order) and every skipped file's problem."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: tuple[SkillProblem, ...] = ()

    def get(self, name: str) -> Skill | None:
        """The skill called ``name``, or ``None``."""
        return self.skills.get(name)

    def enabled(self, names: Iterable[str] | None) -> SkillCatalog:
        """Only the skills ``names`` names (an agent config's ``enabled_skills``; ``None``: all)."""
        if names is None:
            return self
        keep = set(names)
        return SkillCatalog({n: s for n, s in self.skills.items() if n in keep}, self.problems)

    def listed(self) -> list[Skill]:
        """The skills the model is told about: those it may load itself."""
        return [s for s in self.skills.values() if s.model_invocable]

    def view(self) -> SkillList:
        """The API's view: every skill in effect and every problem."""
        return SkillList(
            items=[s.view() for s in self.skills.values()], problems=list(self.problems)
        )


def scan_skills(folders: Iterable[SkillFolder]) -> SkillCatalog:
    """Every skill of ``folders`` (see the module docstring); problems are logged and listed."""
    skills: dict[str, Skill] = {}
    problems: list[SkillProblem] = []
    for folder in folders:
        for found in _scan_folder(folder):
            if isinstance(found, SkillProblem):
                _log_once(folder, found)
                problems.append(found)
                continue
            winner = skills.get(found.name)
            if winner is None:
                skills[found.name] = found
                continue
            problems.append(
                SkillProblem(
                    source=found.source,
                    path=f"{found.name}/SKILL.md",
                    code=SkillProblemCode.SHADOWED,
                    reason=f"the {winner.source.value} skill of the same name is in effect",
                    name=found.name,
                )
            )
    return SkillCatalog(skills, tuple(problems))


def _log_once(folder: SkillFolder, problem: SkillProblem) -> None:
    """Log a skipped skill once per file and reason, not at every run's scan."""
    key = (str(folder.path), problem.path, problem.reason)
    if key in _LOGGED:
        return
    _LOGGED.put(key, True)
    log.warning(
        "skill skipped: %s/%s (%s): %s [%s]",
        folder.path,
        problem.path,
        problem.source.value,
        problem.reason,
        problem.code.value,
    )


def _scan_folder(folder: SkillFolder) -> list[Skill | SkillProblem]:
    try:
        # The entry's type comes with the listing (d_type): no stat per skill folder.
        with os.scandir(folder.path) as it:
            entries = sorted(
                ((e.name, e.is_symlink()) for _, e in zip(range(_MAX_ENTRIES), it, strict=False)),
            )
    except (FileNotFoundError, NotADirectoryError):
        return []  # a folder nobody made has no skills
    except OSError as exc:
        log.warning("skill folder %s unreadable: %s", folder.path, type(exc).__name__)
        return []
    found: list[Skill | SkillProblem] = []
    base = os.fspath(folder.path) + "/"
    for name, link in entries:
        if name.startswith("."):
            continue
        result = _scan_skill(folder, base, name, link)
        if result is None:
            continue
        if len(found) == MAX_SKILLS_PER_FOLDER:
            found.append(
                _problem(
                    folder,
                    name,
                    SkillProblemCode.TOO_MANY,
                    f"a skill folder holds at most {MAX_SKILLS_PER_FOLDER} skills; the rest "
                    "(in name order) are skipped",
                )
            )
            break
        found.append(result)
    return found


def _problem(folder: SkillFolder, name: str, code: SkillProblemCode, reason: str) -> SkillProblem:
    return SkillProblem(
        source=folder.source,
        path=f"{name[:80]}/SKILL.md",
        code=code,
        reason=reason,
        name=name if valid_skill_name(name) else None,
    )


def _scan_skill(
    folder: SkillFolder, base: str, name: str, link: bool
) -> Skill | SkillProblem | None:
    """The skill of ``folder/name`` (``link``: that entry is a symbolic link); ``None`` when it
    is no skill folder at all. Plain strings and one ``lstat``: this runs for every skill at
    every run's start."""
    skill_dir = base + name
    skill_md = skill_dir + "/SKILL.md"
    if link:
        if not os.path.exists(skill_md):
            return None
        return _problem(
            folder, name, SkillProblemCode.UNREADABLE, "a skill folder may not be a link"
        )
    try:
        md_stat = os.lstat(skill_md)  # through a plain file or nothing: not a skill folder
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return _problem(folder, name, SkillProblemCode.UNREADABLE, type(exc).__name__)
    if not valid_skill_name(name):
        return _problem(
            folder,
            name,
            SkillProblemCode.INVALID_NAME,
            "a skill folder's name is lowercase letters, digits, '-' and '_' "
            "(at most 64 characters)",
        )
    if not stat.S_ISREG(md_stat.st_mode):
        return _problem(folder, name, SkillProblemCode.UNREADABLE, "SKILL.md is no regular file")
    key = (skill_md, folder.source)
    stamp = (md_stat.st_ino, md_stat.st_size, md_stat.st_mtime_ns)
    cached = _CACHE.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    result = _read_and_parse(folder, Path(skill_dir), md_stat.st_size)
    _CACHE.put(key, (stamp, result))
    return result


def _read_and_parse(folder: SkillFolder, skill_dir: Path, size: int) -> Skill | SkillProblem:
    name = skill_dir.name
    if size > MAX_SKILL_BYTES:
        return _problem(
            folder, name, SkillProblemCode.TOO_LARGE, f"SKILL.md is over {MAX_SKILL_BYTES} bytes"
        )
    try:
        fd = os.open(skill_dir / "SKILL.md", _OPEN_FLAGS)
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(MAX_SKILL_BYTES + 1)
    except OSError as exc:
        return _problem(folder, name, SkillProblemCode.UNREADABLE, type(exc).__name__)
    if len(raw) > MAX_SKILL_BYTES:
        return _problem(
            folder, name, SkillProblemCode.TOO_LARGE, f"SKILL.md is over {MAX_SKILL_BYTES} bytes"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _problem(folder, name, SkillProblemCode.UNREADABLE, "SKILL.md is not UTF-8 text")
    return parse_skill(text, folder=skill_dir, source=folder.source)


_LOGGED: Recent[tuple[str, str, str], bool] = Recent(_CACHE_SIZE)
# (SKILL.md path, source) → ((inode, size, mtime), what it parsed to): a file is parsed once.
_CACHE: Recent[tuple[str, SkillSource], tuple[tuple[int, int, int], Skill | SkillProblem]] = Recent(
    _CACHE_SIZE
)
