#!/usr/bin/env bash
# The flow-control evaluation (issue 18, seed 004's chapter 5 method).
#
#   scripts/bench-flow.sh            8 s per run, all nine cells and both steps, writes docs/benchmarks/flow.{md,png} (points: $OUT/flow.jsonl, about 13 MB)
#   scripts/bench-flow.sh --quick    2 s per run, one cell and the demand step, writes to $OUT (default /tmp/herald-bench-flow)
#
# In-flight-limited producers (8 connections, 8 requests of 16 records
# each in flight: 1,024 records, about twice the knee of throughput against
# latency measured here; acks=1) send to 1, 16 or 256 subjects (topics), each
# request's subject drawn uniformly, normally or by Poisson; every 20,000
# records answered make one point. Per cell: a sweep of fixed limits
# (128, 256, 512 and 1,024 records, and the gate off) and the three
# controllers (last-three-points, adaptive, gradient), starting at 100. Then, on 16 subjects
# uniform, for each controller and the best fixed limit: a demand step
# (three quarters of the publishers start at half time: 4x the demand) and
# a capacity step (at half time a busy thread pinned to the broker's core
# takes about half of it). The broker runs on core 0 with its data on
# tmpfs, the load generator on core 1. Every broker started here is
# stopped here, by its PID.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

QUICK=""
[ "${1:-}" = "--quick" ] && QUICK=1
OUT="${OUT:-/tmp/herald-bench-flow}"
if [ -n "$QUICK" ]; then
  REPORT_DIR="${REPORT_DIR:-$OUT/report}"
  SECS=2; STEP_SECS=4
  SUBJECTS=(16); CHOICES=(uniform); LIMITS=(256)
else
  REPORT_DIR="${REPORT_DIR:-$ROOT/docs/benchmarks}"
  SECS=8; STEP_SECS=16
  SUBJECTS=(1 16 256); CHOICES=(uniform normal poisson); LIMITS=(128 256 512 1024)
fi
CONTROLLERS=(last-three-points adaptive gradient)
# matplotlib is in the system Python.
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
LOADGEN="$ROOT/target/release/herald-loadgen"
HERALD="$ROOT/target/release/herald"
DATA="/dev/shm/herald-bench-flow"
mkdir -p "$OUT" "$REPORT_DIR"
POINTS="$OUT/flow.jsonl"
: >"$POINTS"

cargo build --release -p herald -p herald-loadgen

PID=""
stop_broker() {
  if [ -n "$PID" ]; then
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
  fi
  rm -rf "$DATA"
}
trap stop_broker EXIT

# start_broker CONTROLLER LIMIT: herald on core 0 with that flow control.
start_broker() {
  stop_broker
  local args=(--flow-control "$1")
  [ "$1" != off ] && args+=(--flow-limit "$2")
  taskset -c 0 "$HERALD" serve --data-dir "$DATA" --kafka-listen 127.0.0.1:29092 \
    --admin-listen 127.0.0.1:29093 --push-listen 127.0.0.1:29094 "${args[@]}" \
    >"$OUT/broker.log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/29092) 2>/dev/null && return 0
    sleep 0.1
  done
  echo "herald did not start" >&2; tail "$OUT/broker.log" >&2; exit 1
}

# run CONTROLLER LIMIT SUBJECTS CHOICE SECS [loadgen args...]
run() {
  local controller=$1 limit=$2 subjects=$3 choice=$4 secs=$5; shift 5
  start_broker "$controller" "$limit"
  echo "== $controller limit=$limit subjects=$subjects $choice $*" >&2
  taskset -c 1 "$LOADGEN" flow --bootstrap 127.0.0.1:29092 --admin 127.0.0.1:29093 \
    --subjects "$subjects" --choice "$choice" --secs "$secs" --publishers 8 --in-flight 8 \
    --label "controller=$controller" --label "start_limit=$limit" "$@" --out "$POINTS"
  stop_broker
}

for subjects in "${SUBJECTS[@]}"; do
  for choice in "${CHOICES[@]}"; do
    run off 0 "$subjects" "$choice" "$SECS" --label scenario=cell
    for limit in "${LIMITS[@]}"; do
      run fixed "$limit" "$subjects" "$choice" "$SECS" --label scenario=cell
    done
    for controller in "${CONTROLLERS[@]}"; do
      run "$controller" 100 "$subjects" "$choice" "$SECS" --label scenario=cell
    done
  done
done

# The best fixed limit of the step cell, by goodput.
BEST=$("$PY" scripts/bench_flow_report.py --best-fixed "$POINTS" 16 uniform)
HALF=$(python3 -c "print($STEP_SECS / 2)")
for controller in "${CONTROLLERS[@]}" fixed; do
  limit=100; [ "$controller" = fixed ] && limit="$BEST"
  run "$controller" "$limit" 16 uniform "$STEP_SECS" --demand-step-at "$HALF" --label scenario=demand-step
  if [ -z "$QUICK" ]; then
    run "$controller" "$limit" 16 uniform "$STEP_SECS" --hog-at "$HALF" --hog-cpu 0 --label scenario=capacity-step
  fi
done

"$PY" scripts/bench_flow_report.py "$POINTS" "$REPORT_DIR" "$HALF"

echo "report in $REPORT_DIR/flow.md" >&2
