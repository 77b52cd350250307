"""What the command line costs: ``soong-agent --help``, and ``soong-agent keys list`` against a
private Valkey on loopback (a command that reaches the bus).

Each round runs, alternately, ``python -c pass`` (the interpreter's own start-up, the baseline)
and ``python -m agent_core.cli --help``, and reads each child's CPU time (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``). Printed last, one JSON line: ``cli_help_cpu_ms`` (median
over the rounds; goal ≤ 500), ``python_startup_cpu_ms`` (the baseline of the same rounds) and
``cli_help_added_cpu_ms`` (the difference of the medians), and ``cli_keys_list_cpu_ms`` (median,
one key listed).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from agent_core.service.valkey import EmbeddedValkey

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 15


def _child_cpu_ms(argv: list[str], env: dict[str, str] | None = None) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
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
    listed: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        valkey = EmbeddedValkey(Path(tmp) / "valkey", appendonly=False)
        valkey.start()
        try:
            env = {**os.environ, "SOONG_AGENT_HOME": tmp, "SOONG_REDIS_URL": valkey.url}
            keys = [sys.executable, "-m", "agent_core.cli", "keys"]
            subprocess.run([*keys, "create", "--account", "bench"], check=True, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            for _ in range(ROUNDS):
                listed.append(_child_cpu_ms([*keys, "list"], env))
        finally:
            valkey.stop()
    result = {
        "bench": "cli",
        "rounds": ROUNDS,
        "cli_help_cpu_ms": round(cli, 1),
        "python_startup_cpu_ms": round(base, 1),
        "cli_help_added_cpu_ms": round(cli - base, 1),
        "cli_keys_list_cpu_ms": round(statistics.median(listed), 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
