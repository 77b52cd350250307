#!/usr/bin/env bash
# Side-by-side run: the two peer runtimes (LangGraph, OpenAI Agents SDK) with the same scripted
# workload as bench/runs.py, then bench/runs.py itself, on this machine, one after the other.
# The peers are installed into their own virtualenv (never the project's); their scripts are read
# from the design notes' peers/ folder. Not part of `make bench` (it downloads the peers).
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS_DIR=${SOONG_PEERS_DIR:-../shared/peers}
VENV=${SOONG_PEERS_VENV:-.peers-venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet langgraph==1.2.24 langgraph-checkpoint-sqlite==3.1.2 \
    openai-agents==0.24.0 aiosqlite
fi
for workload in "--sessions 1 --turns 200" "--sessions 50 --turns 10"; do
  # shellcheck disable=SC2086
  "$VENV/bin/python" "$PEERS_DIR/langgraph_peer.py" $workload | tail -n 1
  # shellcheck disable=SC2086
  "$VENV/bin/python" "$PEERS_DIR/oai_agents_peer.py" $workload | tail -n 1
done
.venv/bin/python bench/runs.py | tail -n 1
