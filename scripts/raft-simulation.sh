#!/usr/bin/env bash
# The long run of herald-raft's cluster simulation (crates/herald-raft/tests/
# simulation.rs): many seeds, each a few simulated minutes of crashes,
# restarts, cut links and lost messages on three nodes, every invariant
# checked after each. CI runs a short version (4 seeds of 30 s).
#
#   scripts/raft-simulation.sh [SEEDS] [SECONDS]     (default 100 seeds of 120 s)
#
# A failing seed is named in the panic; rerun it alone with
#   HERALD_SIM_SEED=S HERALD_SIM_SECONDS=120 HERALD_SIM_TRACE=/tmp/trace \
#     cargo test --release -p herald-raft --test simulation -- --nocapture
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SEEDS="${1:-100}"
SECONDS_EACH="${2:-120}"
HERALD_SIM_SEEDS="$SEEDS" HERALD_SIM_SECONDS="$SECONDS_EACH" \
  cargo test --release -p herald-raft --test simulation -- --nocapture
