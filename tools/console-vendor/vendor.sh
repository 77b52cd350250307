#!/usr/bin/env bash
# Re-vendors the web console's JavaScript libraries (Preact, its hooks, htm) from the npm
# registry at the versions pinned in package-lock.json, into services/gateway/console/vendor/,
# and records what was copied in vendor/VENDORED.json (tests/unit/gateway/test_console_files.py
# checks the files against it). Run by hand (`make console-vendor`) to upgrade; CI never runs it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="$here/../../services/gateway/console/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$work/"
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --silent)
mods="$work/node_modules"
mkdir -p "$dest"
cp "$mods/preact/dist/preact.mjs" "$dest/preact.mjs"
cp "$mods/preact/hooks/dist/hooks.mjs" "$dest/hooks.mjs"
cp "$mods/htm/dist/htm.mjs" "$dest/htm.mjs"
cp "$mods/preact/LICENSE" "$dest/LICENSE-preact"
cp "$mods/htm/LICENSE" "$dest/LICENSE-htm"
python3 - "$mods" "$dest" <<'PY'
import hashlib, json, pathlib, sys
mods, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def version(pkg): return json.loads((mods / pkg / "package.json").read_text())["version"]
files = {
    "preact.mjs": ("preact", "dist/preact.mjs"),
    "hooks.mjs": ("preact", "hooks/dist/hooks.mjs"),
    "htm.mjs": ("htm", "dist/htm.mjs"),
    "LICENSE-preact": ("preact", "LICENSE"),
    "LICENSE-htm": ("htm", "LICENSE"),
}
record = {
    name: {
        "package": f"{pkg}@{version(pkg)}",
        "from": path,
        "sha256": hashlib.sha256((dest / name).read_bytes()).hexdigest(),
    }
    for name, (pkg, path) in files.items()
}
(dest / "VENDORED.json").write_text(json.dumps(record, indent=2) + "\n")
PY
echo "vendored into $dest"
