"""Benchmarks of a base revision and of the working tree, side by side in one sitting.

``make bench-compare BASE=<rev> [ROUNDS=2] [BENCHES="bench/runs.py bench/sdk.py"]``

This machine's speed drifts by 20–30 % within an hour, so figures of two revisions compare only
when measured in one sitting, alternated: for each bench, round after round, the base runs and
then the working tree. The base is exported with ``git archive`` into a temporary folder and run
with the project's virtualenv, its own code first on ``PYTHONPATH`` (the services a bench starts
inherit it); the working tree runs as it is, uncommitted changes included.

Every bench prints one JSON object last. For each numeric key present on both sides the table
shows the median of each side, the ratio (tree ÷ base) and the spread of the rounds (the larger
of the two sides' (max − min) ÷ median). A key is flagged ``WORSE`` when it moved the wrong way by
more than that spread (and by more than 2 %); the way is read from the key's name (rates, ratios
of throughput and efficiencies are better higher; times, CPU, bytes, commands and overheads are
better lower); a key whose name says neither is shown, never flagged. A bench missing on one side
is run on the other only and listed as such. The exit code is 1 when a key is flagged.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"

# Not benchmarks of the runtime: this driver and the helpers.
_SKIP = {"compare.py"}
# Costs first (a CPU or command *rate* is a cost too), then what is better higher, then times.
_COSTS = ("_ms", "_us", "cpu", "bytes", "cmds", "overhead", "latency")
_HIGHER = ("per_s", "efficiency", "ratio_fsync", "speedup", "throughput", "hit_rate")
_MIN_FLAG = 0.02  # below this a move is noise whatever the spread says
# The slowest bench takes about 6 minutes here; one that hangs (a service of an old revision that
# dies at start with the bench waiting on it) must not stall the sitting.
_BENCH_TIMEOUT_S = float(os.environ.get("SOONG_BENCH_TIMEOUT_S", "1200"))


def better_when(key: str) -> str | None:
    """``"higher"``, ``"lower"`` or ``None`` (not judged) for a figure's key."""
    if any(word in key for word in _COSTS):
        return "lower"
    if any(word in key for word in _HIGHER):
        return "higher"
    if key.endswith("_s"):
        return "lower"
    return None


@dataclass
class Side:
    """The figures one revision printed, round after round."""

    runs: list[dict[str, float]] = field(default_factory=list)

    def values(self, key: str) -> list[float]:
        return [run[key] for run in self.runs if key in run]


def spread(values: list[float]) -> float:
    """(max − min) ÷ median of the rounds (0 with one round or a zero median)."""
    if len(values) < 2:
        return 0.0
    mid = statistics.median(values)
    return (max(values) - min(values)) / abs(mid) if mid else 0.0


def verdict(key: str, base: list[float], tree: list[float]) -> tuple[float | None, str]:
    """The ratio tree ÷ base of the medians and ``WORSE``, ``better`` or ``""``."""
    b, t = statistics.median(base), statistics.median(tree)
    if b == 0:
        return None, ""
    ratio = t / b
    way = better_when(key)
    margin = max(spread(base), spread(tree), _MIN_FLAG)
    if way is None or abs(ratio - 1) <= margin:
        return ratio, ""
    worse = ratio > 1 if way == "lower" else ratio < 1
    return ratio, "WORSE" if worse else "better"


def last_json(output: str) -> dict[str, float]:
    """The numeric keys of the last JSON object a bench printed."""
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            data = json.loads(line)
            return {
                k: float(v)
                for k, v in data.items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            }
    raise ValueError("no JSON line")


# Where a failed bench's whole output is kept: the report names the file (its last lines alone
# seldom say which assertion failed, and the sitting's temporary folders are gone by then).
FAILURES = Path(tempfile.gettempdir()) / "soong-bench-compare"


def _keep_failure(bench: str, stdout: str, stderr: str) -> Path:
    """Write a failed run's output to a new file under :data:`FAILURES`; its path."""
    FAILURES.mkdir(exist_ok=True)
    name = Path(bench.split()[0]).stem
    fd, path = tempfile.mkstemp(prefix=f"{name}-", suffix=".log", dir=FAILURES)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(f"$ {bench}\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n")
    return Path(path)


def run_bench(tree: Path, bench: str) -> dict[str, float] | str:
    """The bench's figures, or why it failed (its last lines, and the file that keeps all of its
    output)."""
    env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'shared'}"}
    argv = [str(PYTHON), *bench.split()]
    # A session of its own, so that a bench that overruns is stopped with every process it
    # started (its services, its Valkey).
    with subprocess.Popen(
        argv,
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=_BENCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return f"timed out after {_BENCH_TIMEOUT_S:.0f} s"
    if proc.returncode != 0:
        kept = _keep_failure(bench, stdout, stderr)
        last = " | ".join(stderr.strip().splitlines()[-3:])
        return f"exit {proc.returncode}: {last} (all of it: {kept})"
    try:
        return last_json(stdout)
    except (ValueError, json.JSONDecodeError):
        return "printed no JSON line"


def export(rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "archive", rev], cwd=ROOT, capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True)
    with tempfile.TemporaryFile() as tmp:
        tmp.write(archive)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(into, filter="data")
    write_entry_points(into)


def write_entry_points(tree: Path) -> None:
    """Give an exported tree the entry points its own ``pyproject.toml`` declares.

    The virtualenv's metadata is the working tree's: its CLI commands name modules an older
    revision may not have (the CLI imports every one and dies at the first it cannot). A
    ``.dist-info`` at the top of the tree, first on ``PYTHONPATH``, is found before the installed
    one, and ``importlib.metadata`` keeps the first distribution of a name.
    """
    project = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    sections = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    info = tree / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n",
        encoding="utf-8",
    )
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
            for group, points in sections.items()
        ),
        encoding="utf-8",
    )


def table(name: str, base: Side, tree: Side) -> tuple[list[str], int]:
    """The bench's rows and how many keys got worse. A key the base does not print is shown
    with the tree's figure alone, marked ``new`` (never judged)."""
    rows, worse = [], 0
    for key in tree.runs[0] if tree.runs else {}:
        b, t = base.values(key), tree.values(key)
        if not t:
            continue
        if not b:
            rows.append(
                f"| {name} | {key} | — | {statistics.median(t):.4g} | — | {spread(t):.1%} | new |"
            )
            continue
        ratio, flag = verdict(key, b, t)
        worse += flag == "WORSE"
        shown = "—" if ratio is None else f"{ratio:.3f}"
        width = max(spread(b), spread(t))
        rows.append(
            f"| {name} | {key} | {statistics.median(b):.4g} | {statistics.median(t):.4g} "
            f"| {shown} | {width:.1%} | {flag} |"
        )
    return rows, worse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", help="the revision to compare against (a commit, tag or branch)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--benches",
        default="",
        help='space-separated bench scripts with their arguments, ";" between benches '
        "(default: every bench/*.py)",
    )
    args = parser.parse_args()
    rev = subprocess.run(
        ["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True
    )
    if rev.returncode != 0:
        sys.exit(f"bench-compare: not a revision: {args.base}")
    base_rev = rev.stdout.strip()
    if args.benches:
        benches = [b.strip() for b in args.benches.split(";") if b.strip()]
    else:
        benches = sorted(
            f"bench/{p.name}" for p in (ROOT / "bench").glob("*.py") if p.name not in _SKIP
        )
    with tempfile.TemporaryDirectory(prefix="soong-compare-") as tmp:
        base_tree = Path(tmp) / base_rev
        export(base_rev, base_tree)
        out = [
            f"# bench-compare: base {base_rev} vs the working tree, {args.rounds} round(s) each",
            "",
            "| bench | key | base | tree | tree ÷ base | spread | |",
            "|---|---|---|---|---|---|---|",
        ]
        notes: list[str] = []
        worse = 0
        for bench in benches:
            script = bench.split()[0]
            on_base = (base_tree / script).exists()
            sides = {"base": Side(), "tree": Side()}
            for _ in range(args.rounds):
                for label, where in (("base", base_tree), ("tree", ROOT)):
                    if label == "base" and not on_base:
                        continue
                    print(f"# {label}: {bench}", file=sys.stderr, flush=True)
                    got = run_bench(where, bench)
                    if isinstance(got, str):
                        notes.append(f"- {bench} on {label}: {got}")
                        continue
                    sides[label].runs.append(got)
            if not on_base:
                notes.append(f"- {bench}: not on {base_rev}, run on the working tree only")
                continue
            rows, bad = table(script.removeprefix("bench/"), sides["base"], sides["tree"])
            out += rows
            worse += bad
        out += ["", *notes, "", f"{worse} key(s) worse beyond the rounds' spread"]
    print("\n".join(out))
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
