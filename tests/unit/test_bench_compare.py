"""``bench/compare.py``'s judgement: which way a key is better, when a move counts as worse, and
reading a bench's last JSON line."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO


def _compare() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_compare", REPO / "bench" / "compare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


compare = _compare()


@pytest.mark.parametrize(
    ("key", "way"),
    [
        ("turns_per_s_50x10", "higher"),
        ("scale_efficiency_4", "higher"),
        ("ratio_fsync", "higher"),
        ("turn_p50_ms_1x200", "lower"),
        ("cpu_ms_per_turn_4", "lower"),
        ("background_valkey_cmds_per_s_4", "lower"),  # a rate of a cost is a cost
        ("db_bytes_per_turn", "lower"),
        ("writer_restart_serving_s", "lower"),
        ("sessions", None),
    ],
)
def test_which_way_a_key_is_better(key: str, way: str | None) -> None:
    assert compare.better_when(key) == way


def test_a_move_beyond_the_spread_the_wrong_way_is_worse() -> None:
    ratio, flag = compare.verdict("turn_p50_ms", [10.0, 10.2], [12.0, 12.1])
    assert flag == "WORSE" and ratio == pytest.approx(12.05 / 10.1)
    assert compare.verdict("turns_per_s", [100.0, 101.0], [80.0, 81.0])[1] == "WORSE"
    assert compare.verdict("turns_per_s", [100.0, 101.0], [120.0, 121.0])[1] == "better"


def test_a_move_within_the_spread_or_of_an_unjudged_key_is_not_flagged() -> None:
    # The rounds themselves differ by 30 %: a 10 % move says nothing.
    assert compare.verdict("turn_p50_ms", [10.0, 13.0], [12.5, 12.6])[1] == ""
    assert compare.verdict("turn_p50_ms", [10.0], [10.1])[1] == ""  # under 2 %: noise
    assert compare.verdict("sessions", [10.0], [20.0])[1] == ""
    assert compare.verdict("turn_p50_ms", [0.0], [5.0]) == (None, "")


def test_a_key_only_the_tree_prints_is_shown_new_and_never_judged() -> None:
    base = compare.Side([{"cpu_us": 10.0}, {"cpu_us": 10.0}])
    tree = compare.Side([{"cpu_us": 20.0, "own_cpu_us": 8.0}, {"cpu_us": 20.0, "own_cpu_us": 9.0}])
    rows, worse = compare.table("w.py", base, tree)
    assert worse == 1  # the shared key, twice as high
    assert rows == [
        "| w.py | cpu_us | 10 | 20 | 2.000 | 0.0% | WORSE |",
        "| w.py | own_cpu_us | — | 8.5 | — | 11.8% | new |",
    ]


def test_the_last_json_line_gives_the_numeric_keys(tmp_path: Path) -> None:
    printed = 'warming up\n{"bench": "x", "a": 1, "b": 2.5, "ok": true}\n'
    assert compare.last_json(printed) == {"a": 1.0, "b": 2.5}
    with pytest.raises(ValueError):
        compare.last_json("no figures here\n")


def test_a_bench_that_overruns_is_stopped_with_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bench starts a child that outlives it unless its whole session is killed.
    pid_file = tmp_path / "child.pid"
    (tmp_path / "hang.py").write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(compare, "_BENCH_TIMEOUT_S", 3.0)
    assert compare.run_bench(tmp_path, "hang.py") == "timed out after 3 s"
    child = int(pid_file.read_text(encoding="utf-8"))
    deadline = time.monotonic() + 10  # SIGKILL is sent; wait for the kernel to act on it
    while _state(child) not in {"Z", "gone"} and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _state(child) in {"Z", "gone"}


def test_a_failed_bench_keeps_all_of_its_output_in_a_file_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fails.py").write_text(
        "import sys\n"
        "print('the figures so far')\n"
        "print('AssertionError: the first line of many', file=sys.stderr)\n"
        "for i in range(10): print(f'later line {i}', file=sys.stderr)\n"
        "sys.exit(3)\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(compare, "FAILURES", tmp_path / "failures")
    got = compare.run_bench(tmp_path, "fails.py --rounds 1")
    assert isinstance(got, str) and got.startswith("exit 3: later line 7 | later line 8")
    kept = Path(got.rsplit("(all of it: ", 1)[1].removesuffix(")"))
    assert kept.parent == tmp_path / "failures" and kept.name.startswith("fails-")
    text = kept.read_text(encoding="utf-8")
    assert "$ fails.py --rounds 1" in text and "the figures so far" in text
    assert "AssertionError: the first line of many" in text  # cut from the report's own line


def _state(pid: int) -> str:
    """The process's state letter from ``/proc`` (``Z`` a zombie), or ``gone``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except FileNotFoundError:
        return "gone"
    return text.rsplit(")", 1)[1].split()[0]


def test_an_exported_tree_gets_the_entry_points_of_its_own_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "soong-agent"\nversion = "0.0.1"\n'
        '[project.scripts]\nsoong-agent = "agent_core.cli:main"\n'
        '[project.entry-points."soong_agent.commands"]\nstack = "services.stack.old_cli"\n',
        encoding="utf-8",
    )
    compare.write_entry_points(tmp_path)
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlib.metadata import entry_points as e; "
            "print(sorted(p.value for p in e(group='soong_agent.commands')))",
        ],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # the tree's own command, not the installed package's (memory, chat, assistants …)
    assert found.strip() == "['services.stack.old_cli']"
