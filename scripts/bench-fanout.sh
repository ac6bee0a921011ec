#!/usr/bin/env bash
# The fan-out benchmark: herald's push delivery against core NATS, an MQTT
# broker (Mosquitto, QoS 0 and 1) and the floor (no broker: a relay that
# only writes to the sockets), every one driven by the same clients
# (`herald-loadgen push fanout`), in both CPU layouts, REPEATS runs of
# each point interleaved across systems, and a report of medians with the
# ratios measured in this run.
#
#   scripts/bench-fanout.sh [--quick] [--repeats N] [--layouts pinned,unpinned] [--only s1,saturation]
#
# Scenarios:
#   s1          seed 002's table: one subject, 10 / 100 / 1,000 / 10,000 /
#               as many subscribers as the open-file limit allows, 64-byte
#               messages at 10 msg/s;
#   saturation  one subject, 100 and 1,000 subscribers, the publisher as
#               fast as its window (256 in flight) allows.
# Layouts: `pinned` puts every broker on CPU 0 and the load generator
# (publisher and subscriber processes) on CPU 1; `unpinned` lets the
# kernel place them.
#
# Writes $OUT/fanout.jsonl (default /tmp/herald-bench-fanout) and
# docs/benchmarks/fanout.{md,csv,png} ($DOC to write elsewhere). Every
# broker started here is stopped here, by its PID.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

ASKED="$*"
QUICK=0
REPEATS=3
LAYOUTS="pinned,unpinned"
ONLY="s1,saturation"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --layouts) LAYOUTS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-/tmp/herald-bench-fanout}"
DOC="${DOC:-$ROOT/docs/benchmarks}"
DATA="/dev/shm/herald-bench-fanout"
mkdir -p "$OUT" "$DOC"
ROWS="$OUT/fanout.jsonl"
rm -f "$ROWS"

ulimit -n "$(ulimit -Hn)"
# The charts use Debian's matplotlib, so the report runs on Debian's Python
# (a python3 earlier on PATH may be another one).
REPORT_PY=/usr/bin/python3
if ! "$REPORT_PY" -c 'import matplotlib' 2>/dev/null; then
  echo "== installing python3-matplotlib for the charts"
  apt-get install -y -q python3-matplotlib >/dev/null
fi
source "$ROOT/scripts/lib/push-herald.sh"
cleanup() {
  stop_herald
  bench/nats/stop.sh >/dev/null || true
  bench/mosquitto/stop.sh >/dev/null || true
}
trap cleanup EXIT
start_herald
bench/nats/start.sh
bench/mosquitto/start.sh
source bench/nats/env.sh
source bench/mosquitto/env.sh
NATS_PID="$(cat "$NATS_RUN/nats.pid")"
MOSQUITTO_PID="$(cat "$MOSQUITTO_RUN/mosquitto.pid")"

# Each broker holds one file per subscriber; leave room for its own.
MAX_SUBSCRIBERS=$(( $(ulimit -n) - 2000 ))
if [ "$QUICK" = 1 ]; then
  S1=(10 100 1000)
  S1_SECS=3
  SATURATION=(100)
  SATURATION_SECS=2
else
  S1=(10 100 1000 10000 "$MAX_SUBSCRIBERS")
  S1_SECS=10
  SATURATION=(100 1000)
  SATURATION_SECS=5
fi
# system label, then the arguments that select it.
SYSTEMS=(
  "websocket|--system herald --transport websocket"
  "grpc|--system herald --transport grpc"
  "nats|--system nats --nats $NATS_ADDR"
  "mqtt-qos0|--system mqtt --mqtt $MOSQUITTO_ADDR --qos 0"
  "mqtt-qos1|--system mqtt --mqtt $MOSQUITTO_ADDR --qos 1"
  "kernel|--system floor"
)

pid_of() {
  case "$1" in
    websocket|grpc) echo "$HERALD_PID" ;;
    nats) echo "$NATS_PID" ;;
    mqtt-*) echo "$MOSQUITTO_PID" ;;
    *) echo "" ;;
  esac
}

GEN=()
FLOOR_CPU=()
set_layout() {
  local cpus
  if [ "$1" = pinned ]; then
    cpus=0; GEN=(taskset -c 1); FLOOR_CPU=(--floor-cpu 0)
  else
    cpus="0-$(( $(nproc) - 1 ))"; GEN=(); FLOOR_CPU=()
  fi
  for pid in "$HERALD_PID" "$NATS_PID" "$MOSQUITTO_PID"; do
    taskset -a -cp "$cpus" "$pid" >/dev/null
  done
}

# One run: layout, round, system entry, then fanout arguments. A failed
# run is reported and skipped, not fatal: the table says what is missing.
run() {
  local layout="$1" round="$2" entry="$3"; shift 3
  local label="${entry%%|*}" args="${entry#*|}" pid
  pid="$(pid_of "$label")"
  # shellcheck disable=SC2086
  if row="$("${GEN[@]}" "$LOADGEN" push fanout $args ${pid:+--broker-pid "$pid"} "${FLOOR_CPU[@]}" \
      --push "$PUSH" --bootstrap "$KAFKA" "$@" 2>>"$OUT/loadgen.err")"; then
    echo "{\"layout\":\"$layout\",\"round\":$round,${row#\{}" >> "$ROWS"
  else
    echo "   FAILED: $label $* (see $OUT/loadgen.err)"
  fi
}

wanted() { [[ ",$ONLY," == *",$1,"* ]]; }

IFS=, read -r -a LAYOUT_LIST <<< "$LAYOUTS"
for layout in "${LAYOUT_LIST[@]}"; do
  set_layout "$layout"
  for round in $(seq 1 "$REPEATS"); do
    if wanted s1; then
      for n in "${S1[@]}"; do
        for entry in "${SYSTEMS[@]}"; do
          run "$layout" "$round" "$entry" --subscribers "$n" --rate 10 --secs "$S1_SECS"
        done
        echo "== $layout round $round: s1 at $n subscribers"
      done
    fi
    if wanted saturation; then
      for n in "${SATURATION[@]}"; do
        for entry in "${SYSTEMS[@]}"; do
          run "$layout" "$round" "$entry" --subscribers "$n" --rate 0 --secs "$SATURATION_SECS"
        done
        echo "== $layout round $round: saturation at $n subscribers"
      done
    fi
  done
done

"$REPORT_PY" scripts/bench_fanout_report.py "$ROWS" "$DOC" \
  --command "scripts/bench-fanout.sh $ASKED" --commit "$(git rev-parse --short HEAD)"
echo "report: $DOC/fanout.md"
