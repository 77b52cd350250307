#!/usr/bin/env bash
# Side-by-side run: the two peer runtimes (LangGraph, OpenAI Agents SDK) with the same scripted
# workload as bench/runs.py, then bench/runs.py itself, on this machine, one after the other.
# The peers are installed into their own virtualenv (never the project's); their scripts are read
# from the design notes' peers/ folder (SOONG_PEERS_DIR). Not part of `make bench` (it downloads
# the peers).
#
# Printed last: bench/runs.py's JSON line with the peers' figures added —
# peer_cpu_ms_per_turn_50x10 (the best peer's process CPU per turn at 50 × 10; an in-process peer
# runs its driver, runtime and SQLite in that one process) and each peer's own
# (<peer>_cpu_ms_per_turn_50x10, <peer>_turns_per_s_50x10).
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS_DIR=${SOONG_PEERS_DIR:?set SOONG_PEERS_DIR to the folder of the peer scripts}
VENV=${SOONG_PEERS_VENV:-.peers-venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet langgraph==1.2.24 langgraph-checkpoint-sqlite==3.1.2 \
    openai-agents==0.24.0 aiosqlite
fi
peers=$(mktemp)
trap 'rm -f "$peers"' EXIT
for workload in "--sessions 1 --turns 200" "--sessions 50 --turns 10"; do
  # shellcheck disable=SC2086
  "$VENV/bin/python" "$PEERS_DIR/langgraph_peer.py" $workload | tail -n 1 | tee -a "$peers"
  # shellcheck disable=SC2086
  "$VENV/bin/python" "$PEERS_DIR/oai_agents_peer.py" $workload | tail -n 1 | tee -a "$peers"
done
ours=$(.venv/bin/python bench/runs.py "$@" | tail -n 1)
.venv/bin/python - "$peers" "$ours" <<'PY'
import json, sys

result = json.loads(sys.argv[2])
at_50x10 = [
    json.loads(line)
    for line in open(sys.argv[1])
    if line.strip() and json.loads(line)["sessions"] == 50
]
for peer in at_50x10:
    name = peer["bench"].removesuffix("_peer")
    result[f"{name}_cpu_ms_per_turn_50x10"] = peer["cpu_ms_per_turn"]
    result[f"{name}_turns_per_s_50x10"] = peer["turns_per_s"]
result["peer_cpu_ms_per_turn_50x10"] = min(p["cpu_ms_per_turn"] for p in at_50x10)
print(json.dumps(result))
PY
