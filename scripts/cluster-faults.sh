#!/usr/bin/env bash
# The cluster fault test, long: tests/compat/cluster_faults.py in a private
# network namespace for SECONDS (default 300) per run, RUNS times (default
# 3) with different seeds. Three herald nodes on 127.0.0.2-4; Kafka's
# VerifiableProducer (acks=all) and VerifiableConsumer as the clients; the
# nemesis SIGKILLs leaders, SIGSTOPs nodes and cuts nodes off. Even runs use
# the Java producer's defaults (idempotence on, five requests in flight) and
# must read no record twice; odd runs one request in flight. Each run
# prints its JSON report; the script fails if any run loses, moves or
# reorders an acknowledged record.
#
#   scripts/cluster-faults.sh [SECONDS] [RUNS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_PER_RUN="${1:-300}"
RUNS="${2:-3}"
cd "$ROOT"
cargo build --release -p herald
"$ROOT/bench/kafka/setup.sh" >/dev/null
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || PY=python3
WORK="$(mktemp -d /tmp/herald-faults.XXXXXX)"
failed=0
for run in $(seq 1 "$RUNS"); do
  seed=$((RANDOM * 32768 + RANDOM))
  echo "== run $run of $RUNS (seed $seed, ${SECONDS_PER_RUN}s)"
  mode=""; [ $((run % 2)) -eq 0 ] && mode="--idempotent"
  if ! unshare -rn "$PY" tests/compat/cluster_faults.py --herald target/release/herald $mode \
      --kafka-lib bench/kafka/lib --work "$WORK/run-$run" --seconds "$SECONDS_PER_RUN" \
      --seed "$seed" 2>"$WORK/run-$run.stderr" | grep '^{'; then
    failed=1
    echo "run $run failed; logs in $WORK/run-$run"
  fi
done
exit "$failed"
