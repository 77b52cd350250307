"""No module outside agent_core/provider/ imports the official provider SDKs."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SDKS = {"openai", "anthropic"}
ALLOWED = ROOT / "shared" / "agent_core" / "provider"
SCANNED = [ROOT / "shared", ROOT / "services"]


def sdk_imports(path: Path) -> list[str]:
    """The SDK modules a Python file imports (``import x`` and ``from x import y``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [n for n in names if n.split(".")[0] in SDKS]
    return found


def test_scan_finds_sdk_imports(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("import os\nimport openai.types\nfrom anthropic import AsyncAnthropic\n")
    assert sdk_imports(sample) == ["openai.types", "anthropic"]


def test_no_sdk_import_outside_provider_package() -> None:
    offenders = {}
    files = [p for base in SCANNED if base.exists() for p in base.rglob("*.py")]
    assert any(p.is_relative_to(ALLOWED) for p in files), "the scan covers the provider package"
    for path in files:
        if path.is_relative_to(ALLOWED):
            continue
        if found := sdk_imports(path):
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def test_provider_package_does_import_the_sdks() -> None:
    # Guards the scan against silently looking at the wrong tree.
    found = {name for p in ALLOWED.rglob("*.py") for name in sdk_imports(p)}
    assert {"openai", "anthropic"} <= {n.split(".")[0] for n in found}
