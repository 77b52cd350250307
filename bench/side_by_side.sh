#!/usr/bin/env bash
# Side by side, alternating, in one sitting: a benchmark run against several git revisions of
# this repository, round after round (this machine's speed drifts by 20–30 % within an hour, so
# only alternating runs compare). Each revision is exported to a temporary directory and run with
# the project's virtualenv, its code first on PYTHONPATH (the services the stack starts inherit
# it). Prints one line per run: the revision, then the bench's last line.
#
#   bench/side_by_side.sh ROUNDS "bench/runs.py --quick" REV [REV ...]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=$1 bench=$2
shift 2
work=$(mktemp -d -t soong-side-by-side-XXXXXX)
trap 'rm -rf "$work"' EXIT
python=$(pwd)/.venv/bin/python
for rev in "$@"; do
  mkdir -p "$work/$rev"
  git archive "$rev" | tar -x -C "$work/$rev"
done
for _ in $(seq "$rounds"); do
  for rev in "$@"; do
    # shellcheck disable=SC2086
    line=$(cd "$work/$rev" && PYTHONPATH="$work/$rev:$work/$rev/shared" "$python" $bench | tail -n 1)
    echo "$rev $line"
  done
done
