"""What a Dockerfile's final image holds, read without Docker: its user, directories and owners.

Only the instructions that shape the run-time file system are interpreted (``FROM``, ``USER``,
``ENV``, ``WORKDIR``, ``COPY``, ``EXPOSE`` and, inside ``RUN``, ``useradd``, ``mkdir``,
``install -d`` and ``chown``); anything else is ignored. That is enough to answer the questions the
compose check asks: does a mounted path exist in the image, and does the service's user own it?
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ImageFacts", "read_dockerfile"]

_ROOT = "root"


@dataclass
class ImageFacts:
    """The final stage of a Dockerfile as far as the run-time file system goes."""

    user: str = _ROOT
    dirs: dict[str, str] = field(default_factory=dict)  # absolute path → owner
    env: dict[str, str] = field(default_factory=dict)
    exposed: set[int] = field(default_factory=set)
    installs: list[str] = field(default_factory=list)  # RUN lines of the whole file
    copies: list[str] = field(default_factory=list)  # COPY sources of the whole file

    def owner(self, path: str) -> str | None:
        """Who owns ``path`` in the image, or ``None`` when the image has no such directory."""
        return self.dirs.get(posixpath.normpath(path))


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _mkdir(facts: ImageFacts, path: str, owner: str) -> None:
    path = posixpath.normpath(path)
    parts = path.strip("/").split("/")
    for i in range(1, len(parts)):
        facts.dirs.setdefault("/" + "/".join(parts[:i]), _ROOT)
    facts.dirs[path] = owner


def _run(facts: ImageFacts, command: str) -> None:
    for segment in re.split(r"&&|;", command):
        try:
            argv = shlex.split(segment)
        except ValueError:
            continue
        if not argv:
            continue
        name, args = argv[0], argv[1:]
        paths = [a for a in args if a.startswith("/")]
        if name == "mkdir":
            for path in paths:
                _mkdir(facts, path, _ROOT)
        elif name == "install" and "-d" in args:
            owner = args[args.index("-o") + 1] if "-o" in args else _ROOT
            for path in paths:
                _mkdir(facts, path, owner)
        elif name == "chown" and args:
            recursive = "-R" in args
            operands = [a for a in args if not a.startswith("-")]
            owner = operands[0].split(":")[0]
            for path in operands[1:]:
                path = posixpath.normpath(path)
                for known in list(facts.dirs):
                    if known == path or (recursive and known.startswith(path + "/")):
                        facts.dirs[known] = owner
        elif name == "useradd" and "--create-home" in args:
            _mkdir(facts, f"/home/{args[-1]}", args[-1])


def read_dockerfile(path: Path) -> ImageFacts:
    """The facts of the final stage of the Dockerfile at ``path`` (raises ``OSError``)."""
    facts = ImageFacts()
    for word, rest in _instructions(path.read_text(encoding="utf-8")):
        if word == "FROM":  # a new stage: only the last one is the image
            facts = ImageFacts(installs=facts.installs, copies=facts.copies)
        elif word == "USER":
            facts.user = rest.split(":")[0]
        elif word == "ENV":
            for key, value in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\S+)", rest):
                facts.env[key] = value
        elif word == "WORKDIR" and facts.owner(rest) is None:
            _mkdir(facts, rest, _ROOT)  # created if missing, owned by root (never chowned)
        elif word == "EXPOSE":
            facts.exposed |= {int(p.split("/")[0]) for p in rest.split() if p[0].isdigit()}
        elif word == "COPY":
            facts.copies.append(rest)
        elif word == "RUN":
            facts.installs.append(rest)
            _run(facts, rest)
    return facts
