"""The repository cites only what it holds: no design document from outside it, by name or section.

Comments and docs point at ``docs/architecture.md`` (the design as built); a reader of a clone
has no "seed 000" or "§3" to look up.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Vendored third-party assets (the offline API docs' bundles) are not ours to edit.
_SKIP = ("services/gateway/static/docs/",)
_SUFFIXES = {".py", ".md", ".toml", ".sh", ".js", ".css", ".html", ".yml", ".yaml", ".txt", ".json"}
_OUTSIDE = re.compile(r"\b[Ss]eeds? ?0\d\d\b|§\s?\d|\.\./shared/(?!peers\b)|\bSTYLE\.md\b")


def _ours() -> list[Path]:
    folders = ["shared", "services", "tests", "bench", "docs", ".ci", "examples"]
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml"]
    for folder in folders:
        files += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.is_file()
            and p.suffix in _SUFFIXES | {""}
            and "__pycache__" not in p.parts
            and not str(p.relative_to(ROOT)).startswith(_SKIP)
        ]
    return files


def test_nothing_cites_a_document_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _ours()
        if path.resolve() != this
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if _OUTSIDE.search(line)
    ]
    assert found == []


def test_the_pattern_finds_what_it_is_for() -> None:
    for cited in ("(seed 000)", "Seed 004 §2", "see §3.1", "../shared/ARCHITECTURE.md"):
        assert _OUTSIDE.search(cited), cited
    for fine in ("docs/architecture.md", "seed=42", "../shared/peers", "random.seed(0)"):
        assert not _OUTSIDE.search(fine), fine


# Package registries' hosts: the repository names none (examples use example.org / example.com),
# so nothing in it reads as an address to fetch from. Written as patterns so this file passes.
_REGISTRY = re.compile(
    r"\b(?:pypi\.(?:org|python\.org)|files\.pythonhosted\.org|(?:registry\.)?npmjs\.(?:org|com)"
    r"|registry\.yarnpkg\.com|deb\.debian\.org|security\.debian\.org|crates\.io"
    r"|proxy\.golang\.org|repo\d?\.maven\.org|rubygems\.org)\b",
    re.IGNORECASE,
)


def test_no_package_registry_host_is_named() -> None:
    this = Path(__file__).resolve()
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in [*_ours(), ROOT / "deploy" / "config.example.toml"]
        if path.resolve() != this
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if _REGISTRY.search(line)
    ]
    assert found == []


def test_the_registry_pattern_finds_what_it_is_for() -> None:
    for named in ('allowed_hosts = ["PyPI.org"]', "https://registry.npmjs.org/x", "deb.debian.org"):
        assert _REGISTRY.search(named), named
    for fine in ("data.example.org", "files.example.com", "pypi_mirror", "npm install"):
        assert not _REGISTRY.search(fine), fine
