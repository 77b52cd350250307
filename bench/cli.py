"""What the command line costs before it does anything: ``soong-agent --help``.

Each round runs, alternately, ``python -c pass`` (the interpreter's own start-up, the baseline)
and ``python -m agent_core.cli --help``, and reads each child's CPU time (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``). Printed last, one JSON line: ``cli_help_cpu_ms`` (median
over the rounds; goal ≤ 500), ``python_startup_cpu_ms`` (the baseline of the same rounds) and
``cli_help_added_cpu_ms`` (the difference of the medians).
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 15


def _child_cpu_ms(argv: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return spent * 1000


def main() -> None:
    bare: list[float] = []
    helped: list[float] = []
    for _ in range(ROUNDS):
        bare.append(_child_cpu_ms([sys.executable, "-c", "pass"]))
        helped.append(_child_cpu_ms([sys.executable, "-m", "agent_core.cli", "--help"]))
    cli, base = statistics.median(helped), statistics.median(bare)
    result = {
        "bench": "cli",
        "rounds": ROUNDS,
        "cli_help_cpu_ms": round(cli, 1),
        "python_startup_cpu_ms": round(base, 1),
        "cli_help_added_cpu_ms": round(cli - base, 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
