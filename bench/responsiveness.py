"""Responsiveness benchmark: the services keep answering while the worst allowed input is handled.

The tests below assert that every request is answered (with hang guards far beyond any wait);
how fast is a figure they print, collected here and held to its promise of 1 s:

* ``worker_ping_during_worst_grep_s`` — slowest health ping of a run-worker whose tool greps
  ``(a+)+$`` over the largest file it reads;
* ``memory_render_during_worst_consolidation_s`` — slowest render while memory-extraction
  consolidates the largest messages of long character runs;
* ``memory_render_during_worst_put_s`` — slowest render while the largest memory file is put
  (the worst of the put shapes);
* ``memory_put_worst_s`` — the slowest of those puts;
* ``http_memory_read_during_worst_put_s`` — slowest ``GET /v1/memory`` while the largest file is
  ``PUT`` through the gateway;
* ``bad_last_event_id_refused_s`` and ``next_stream_served_s`` — an out-of-range Last-Event-ID
  refused, and another run's stream served right after.

Each figure is the worst over ``--rounds``; ``within_promises`` is false, and the figures over
their bound are named in ``broken``, when one is missed. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys

from helpers.figures import printed_figures

TESTS = [
    "tests/integration/run_worker/test_walls.py::test_the_worst_grep_never_stalls_the_worker",
    "tests/integration/memory_extraction/test_stalls.py",
    "tests/e2e/gateway/test_tasks_memory_api.py::"
    "test_a_memory_put_of_the_worst_allowed_size_leaves_the_memory_routes_answering",
    "tests/e2e/gateway/test_walls_stack.py::"
    "test_an_out_of_range_last_event_id_is_refused_and_streams_go_on",
]
NUMBER = r"([\d.]+)s"
FIGURES = {
    "worker_ping_during_worst_grep_s": rf"worker ping during the worst grep: slowest {NUMBER}",
    "memory_render_during_worst_consolidation_s": (
        rf"memory render during the worst consolidation: slowest {NUMBER}"
    ),
    "memory_render_during_worst_put_s": rf"memory put of the worst file: [\d.]+s, render slowest {NUMBER}",
    "memory_put_worst_s": rf"memory put of the worst file: {NUMBER}",
    "http_memory_read_during_worst_put_s": (
        rf"memory PUT of the worst file over HTTP: [\d.]+s, reads slowest {NUMBER}"
    ),
    "bad_last_event_id_refused_s": rf"bad Last-Event-ID refused in {NUMBER}",
    "next_stream_served_s": rf"next stream served in {NUMBER}",
}
PROMISE_S = 1.0


def _round() -> dict[str, float]:
    return printed_figures(TESTS, FIGURES, "responsiveness")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    rounds = [_round() for _ in range(args.rounds)]
    for i, figures in enumerate(rounds, 1):
        print(f"# round {i}: {json.dumps(figures)}", file=sys.stderr)
    worst = {name: round(max(r[name] for r in rounds), 3) for name in FIGURES}
    broken = sorted(name for name, value in worst.items() if value >= PROMISE_S)
    print(
        json.dumps(
            {
                "bench": "responsiveness",
                "rounds": args.rounds,
                **worst,
                "promise_s": PROMISE_S,
                "within_promises": not broken,
                "broken": broken,
            }
        )
    )


if __name__ == "__main__":
    main()
