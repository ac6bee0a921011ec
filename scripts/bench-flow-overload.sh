#!/usr/bin/env bash
# Open-loop overload (issue 18): producers offering twice the broker's peak
# rate, herald with each flow-control setup and Apache Kafka 4.3.1 beside.
#
#   scripts/bench-flow-overload.sh           20 s per run, 2 repeats; writes docs/benchmarks/flow-overload.md (about 12 minutes)
#   scripts/bench-flow-overload.sh --quick   6 s per run, 1 repeat, herald only; writes to $OUT (default /tmp/herald-bench-flow-overload)
#
# The durable regime of scripts/bench-flow.sh (each broker fsyncs before it
# answers, acks=-1, data on the machine's disk; herald --flush every-append,
# Kafka log.flush.interval.messages=1), 16 subjects chosen uniformly, 32
# connections. First each broker's peak: closed loop, 16 requests of 16
# records in flight per connection. Then open loop at twice that peak:
# requests due on a fixed schedule whatever the answers; a connection
# holds up to 256 requests in flight (the client's buffer), and one due
# while its buffer is full is refused at once, as a producer with a full
# queue refuses a record; one answered more than 5 s after it was due
# counts as timed out (as a producer's delivery timeout would). Latency
# runs from when a request was due. The broker runs on core 0, the load generator on core 1;
# every broker started here is stopped here, by its PID.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
source "$ROOT/scripts/flow-broker.sh"

QUICK=""
[ "${1:-}" = "--quick" ] && QUICK=1
OUT="${OUT:-/tmp/herald-bench-flow-overload}"
if [ -n "$QUICK" ]; then
  REPORT_DIR="${REPORT_DIR:-$OUT/report}"; SECS=6; REPEATS=1
else
  REPORT_DIR="${REPORT_DIR:-$ROOT/docs/benchmarks}"; SECS=20; REPEATS="${REPEATS:-2}"
fi
DATA="$OUT/data"
mkdir -p "$OUT" "$REPORT_DIR"
POINTS="$OUT/overload.jsonl"
: >"$POINTS"

cargo build --release -p herald -p herald-loadgen

FLUSH=every-append
export KAFKA_DATA="$OUT/kafka-data" KAFKA_RUN="$OUT/kafka-run"
stop_all() {
  stop_broker
  "$ROOT/bench/kafka/stop.sh" --wipe >/dev/null 2>&1 || true
}
trap stop_all EXIT

# load BOOTSTRAP [loadgen args...]
load() {
  local bootstrap=$1; shift
  echo "== $bootstrap $*" >&2
  taskset -c 1 "$LOADGEN" flow --bootstrap "$bootstrap" --subjects 16 --choice uniform \
    --publishers 32 --acks -1 --secs "$SECS" "$@" --out "$POINTS"
}

# peak LABEL...: the last run's goodput, from its points.
peak_of() {
  "$PY" scripts/bench_flow_report.py --overload-peak "$POINTS" "$@"
}

for repeat in $(seq "$REPEATS"); do
  start_broker off 0
  load 127.0.0.1:29092 --in-flight 16 --label broker=herald --label scenario=peak \
    --label controller=off --label start_limit=0 --label "repeat=$repeat"
  stop_broker
  peak=$(peak_of herald "$repeat")
  rate=$(( peak * 2 ))
  for setup in off:0 fixed:1024 last-three-points:100 adaptive:100 gradient:100; do
    controller=${setup%%:*}; limit=${setup##*:}
    start_broker "$controller" "$limit"
    load 127.0.0.1:29092 --admin 127.0.0.1:29093 --in-flight 256 --offered-rate "$rate" \
      --deadline-ms 5000 --label broker=herald --label scenario=overload \
      --label "controller=$controller" --label "start_limit=$limit" --label "repeat=$repeat" \
      --label "offered=$rate"
    stop_broker
  done
  if [ -z "$QUICK" ]; then
    printf 'log.flush.interval.messages=1\n' >"$OUT/kafka-durable.properties"
    KAFKA_EXTRA_PROPERTIES="$OUT/kafka-durable.properties" "$ROOT/bench/kafka/start.sh" >&2
    taskset -a -cp 0 "$(cat "$KAFKA_RUN/kafka.pid")" >/dev/null
    load 127.0.0.1:19392 --in-flight 16 --label broker=kafka --label scenario=peak \
      --label controller=kafka --label start_limit=0 --label "repeat=$repeat"
    peak=$(peak_of kafka "$repeat")
    rate=$(( peak * 2 ))
    load 127.0.0.1:19392 --in-flight 256 --offered-rate "$rate" --deadline-ms 5000 \
      --label broker=kafka --label scenario=overload --label controller=kafka \
      --label start_limit=0 --label "repeat=$repeat" --label "offered=$rate"
    "$ROOT/bench/kafka/stop.sh" --wipe >&2
  fi
done

"$PY" scripts/bench_flow_report.py --overload "$POINTS" "$REPORT_DIR"
echo "report in $REPORT_DIR/flow-overload.md" >&2
