"""The console's static files: shipped in the wheel, nothing loaded from elsewhere, every module
it imports present, the vendored libraries exactly as recorded, and a policy that lets the page's
one inline script (the import map) run and nothing else."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zipfile
from pathlib import Path

from hatchling.builders.wheel import WheelBuilder

from services.gateway.routes_console import CONSOLE_DIR, content_security_policy

REPO = Path(__file__).resolve().parents[3]
VENDOR = CONSOLE_DIR / "vendor"
_IMPORT = re.compile(r"""(?:^|[;\s])(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]""", re.M)
_DYNAMIC = re.compile(r"""import\(\s*['"]([^'"]+)['"]\s*\)""")


def _console_files() -> set[str]:
    return {str(p.relative_to(CONSOLE_DIR)) for p in CONSOLE_DIR.rglob("*") if p.is_file()}


def test_the_wheel_ships_every_console_file(tmp_path: Path) -> None:
    wheel = next(
        iter(WheelBuilder(str(REPO)).build(directory=str(tmp_path), versions=["standard"]))
    )
    prefix = "services/gateway/console/"
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n.removeprefix(prefix) for n in archive.namelist() if n.startswith(prefix)}
    assert shipped == _console_files()


def test_nothing_is_loaded_from_another_origin() -> None:
    for name in _console_files():
        if name.startswith("vendor/LICENSE") or name.endswith(".json"):
            continue
        text = (CONSOLE_DIR / name).read_text(encoding="utf-8")
        # Vendored code may mention URLs in strings (docs links); ours load none.
        if not name.startswith("vendor/"):
            assert not re.search(r"https?://", text), name
        assert "//cdn" not in text and "unpkg" not in text and "jsdelivr" not in text, name


def test_every_import_resolves_to_a_shipped_module() -> None:
    index = (CONSOLE_DIR / "index.html").read_text(encoding="utf-8")
    import_map = json.loads(re.search(r'<script type="importmap">(.*?)</script>', index, re.S)[1])
    bare = import_map["imports"]
    for target in bare.values():
        assert (CONSOLE_DIR / target).is_file(), target
    modules = [*CONSOLE_DIR.glob("js/*.js"), *VENDOR.glob("*.mjs")]
    for module in modules:
        text = module.read_text(encoding="utf-8")
        for spec in _IMPORT.findall(text) + _DYNAMIC.findall(text):
            if spec in bare:
                continue
            assert spec.startswith("./"), f"{module.name} imports {spec}"
            assert (module.parent / spec).is_file(), f"{module.name} imports missing {spec}"


def test_vendored_libraries_are_exactly_the_recorded_ones() -> None:
    record = json.loads((VENDOR / "VENDORED.json").read_text())
    lock = json.loads((REPO / "tools" / "console-vendor" / "package-lock.json").read_text())
    pinned = {
        name.removeprefix("node_modules/"): entry["version"]
        for name, entry in lock["packages"].items()
        if name
    }
    assert set(record) == {p.name for p in VENDOR.iterdir()} - {"VENDORED.json"}
    for name, entry in record.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == entry["sha256"], name
        package, version = entry["package"].rsplit("@", 1)
        assert pinned[package] == version, name


def test_the_policy_admits_the_import_map_and_no_other_inline_script() -> None:
    index = (CONSOLE_DIR / "index.html").read_text(encoding="utf-8")
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", index, re.S)
    inline = [body for attrs, body in scripts if "src=" not in attrs]
    assert len(inline) == 1 and 'type="importmap"' in scripts[0][0]
    policy = content_security_policy(index)
    digest = hashlib.sha256(inline[0].encode()).digest()
    assert f"'sha256-{base64.b64encode(digest).decode()}'" in policy
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
    assert content_security_policy(index.replace(inline[0], inline[0] + " ")) != policy
