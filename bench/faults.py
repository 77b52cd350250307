"""Fault benchmark: how fast the stack notices and recovers from faults, on this machine.

Runs the process-level fault tests (``tests/e2e/test_faults.py``: a whole ``soong-agent up`` whose
database lives on a 48 MiB tmpfs; ``tests/integration/run_worker/test_lost_worker.py``: a cluster
of real run-worker processes) ``--rounds`` times and collects the figures they measure:

* ``writer_restart_serving_s`` — storage-writer SIGKILL → a new session is created again;
* ``lost_worker_noticed_s`` — run-worker SIGKILL → another worker holds its lanes;
* ``bus_restart_serving_s`` — the embedded Valkey restarted → the API answers 200 again;
* ``gateway_stream_slot_free_s`` — gateway SIGKILL → one of its SSE slots is free again;
* ``full_disk_reported_s`` — the database's disk filled → the first 507 ``storage_full``;
* ``full_disk_recovered_s`` — space freed → a new session is created again.

Each figure is the worst over the rounds, held to its promise (``PROMISES``): the tests assert
what happened, never how fast, so this is where the bounds live; ``within_promises`` is false
and the broken ones are named when one is missed. The tests mount a tmpfs, so this runs as root.
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys

from helpers.figures import printed_figures

TESTS = ["tests/e2e/test_faults.py", "tests/integration/run_worker/test_lost_worker.py"]
FIGURES = {
    "writer_restart_serving_s": r"writer SIGKILL: serving again after ([\d.]+)s",
    "lost_worker_noticed_s": r"lost worker noticed after ([\d.]+)s",
    "bus_restart_serving_s": r"valkey SIGKILL: serving again ([\d.]+)s after its restart",
    "gateway_stream_slot_free_s": r"gateway SIGKILL: a stream slot free again after ([\d.]+)s",
    "full_disk_reported_s": r"full disk reported after ([\d.]+)s",
    "full_disk_recovered_s": r"full disk: serving again ([\d.]+)s after space returned",
}

# Upper bounds the stack promises, in seconds (the lease TTL of 2 s plus one sweep of 0.5 s, with
# margin, for a lost worker).
PROMISES = {
    "writer_restart_serving_s": 5.0,
    "lost_worker_noticed_s": 3.0,
    "full_disk_reported_s": 15.0,
}


def _round() -> dict[str, float]:
    return printed_figures(TESTS, FIGURES, "fault")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    rounds = [_round() for _ in range(args.rounds)]
    for i, figures in enumerate(rounds, 1):
        print(f"# round {i}: {json.dumps(figures)}", file=sys.stderr)
    worst = {name: round(max(r[name] for r in rounds), 2) for name in FIGURES}
    broken = sorted(name for name, bound in PROMISES.items() if worst[name] >= bound)
    print(
        json.dumps(
            {"rounds": args.rounds, **worst, "within_promises": not broken, "broken": broken}
        )
    )


if __name__ == "__main__":
    main()
