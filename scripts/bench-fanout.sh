#!/usr/bin/env bash
# The fan-out benchmark: herald's push delivery against core NATS (and
# NATS JetStream where persistence is needed), an MQTT broker (Mosquitto,
# QoS 0 and 1) and the floor (no broker: a relay that
# only writes to the sockets), every one driven by the same clients
# (`herald-loadgen push fanout`), in both CPU layouts, REPEATS runs of
# each point interleaved across systems, and a report of medians with the
# ratios measured in this run.
#
#   scripts/bench-fanout.sh [--quick] [--repeats N] [--layouts pinned,unpinned]
#                           [--only s1,saturation,s2,s3,s4,s5,s6]
#                           [--append --first-round K]
#
# Scenarios (--quick: fewer subscribers and subjects, shorter runs):
#   s1          seed 002's table: one subject, 10 / 100 / 1,000 / 10,000 /
#               as many subscribers as the open-file limit allows, 64-byte
#               messages at 10 msg/s;
#   saturation  one subject, 100 and 1,000 subscribers, the publisher as
#               fast as its window (256 in flight) allows;
#   s2          seed 003's rounds: as many subscribers as allowed, 20
#               messages to each per round, a round a second for a minute;
#   s3          seed 004's subjects: 1,000,000 subjects (herald: a
#               16-partition topic), 10,000 subscribers of 10 subjects
#               each (100,000 subscriptions), the publisher at saturation
#               choosing subjects uniformly, normally, by Poisson and by
#               Zipf;
#   s4          s3 (uniform and Zipf) with a pattern of 100 subjects per
#               subscriber besides: 10,000 patterns;
#   s5          s1 at 10,000 subscribers, 1% of them stop reading for 10 s
#               (and, beside it, the same load with nobody stalling);
#   s6          s1 at 10,000 subscribers, every connection dropped and
#               reopened within 1 s, resuming where the broker can.
# Layouts: `pinned` puts every broker on CPU 0 and the load generator
# (publisher and subscriber processes) on CPU 1; `unpinned` lets the
# kernel place them.
#
# Writes $OUT/fanout.jsonl (default /tmp/herald-bench-fanout), merges its
# rows into docs/benchmarks/fanout.jsonl (this run's layouts and scenarios
# replace theirs there; the rest stay as last measured, with their commit)
# and writes docs/benchmarks/fanout.{md,csv,png} from that ($DOC to write
# elsewhere). --append adds the rows as further rounds instead (numbered
# from --first-round), for a run continued in another session: the medians
# then cover every round. Every
# broker started here is stopped here, by its PID.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

ASKED="$*"
QUICK=0
REPEATS=3
LAYOUTS="pinned,unpinned"
ONLY="s1,saturation,s2,s3,s4,s5,s6"
APPEND=()
FIRST_ROUND=1
while [ $# -gt 0 ]; do
  case "$1" in
    --append) APPEND=(--append); shift ;;
    --first-round) FIRST_ROUND="$2"; shift 2 ;;
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
COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates scripts bench || echo '+changes')"

ulimit -n "$(ulimit -Hn)"
# s6 reopens 10,000 connections within a second. The kernel caps every
# listener's accept queue at net.core.somaxconn (4,096 by default here), and
# past it drops SYNs that the clients resend 1, 3, 7 s later, for every
# broker alike: a broker for that many clients runs with the cap raised.
# Raised for this run where this user may, and put back on exit.
SOMAXCONN_WAS="$(cat /proc/sys/net/core/somaxconn)"
SOMAXCONN_SET=0
if [ "$SOMAXCONN_WAS" -lt 16384 ] && { echo 16384 > /proc/sys/net/core/somaxconn; } 2>/dev/null; then
  SOMAXCONN_SET=1
else
  echo "== net.core.somaxconn stays $SOMAXCONN_WAS: s6's reconnection storm may see SYN retries"
fi
# The charts use Debian's matplotlib, so the report runs on Debian's Python
# (a python3 earlier on PATH may be another one).
REPORT_PY=/usr/bin/python3
if ! "$REPORT_PY" -c 'import matplotlib' 2>/dev/null; then
  echo "== installing python3-matplotlib for the charts"
  apt-get install -y -q python3-matplotlib >/dev/null
fi
source "$ROOT/scripts/lib/push-herald.sh"
cleanup() {
  if [ "$SOMAXCONN_SET" = 1 ]; then echo "$SOMAXCONN_WAS" > /proc/sys/net/core/somaxconn || true; fi
  stop_herald
  # --wipe: the JetStream store lives in tmpfs, that is, in memory.
  bench/nats/stop.sh --wipe >/dev/null || true
  bench/mosquitto/stop.sh >/dev/null || true
}
trap cleanup EXIT
start_herald
# JetStream on: the s5 and s6 runs that need persistence use it; core NATS
# subjects outside its stream (which exists only during a JetStream run)
# are routed as without it.
bench/nats/start.sh --jetstream
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
  S2_SUBSCRIBERS=1000; S2_SECS=5
  S3_SUBSCRIBERS=1000; S3_SUBJECTS=100000; S3_SECS=2
  S56_SUBSCRIBERS=1000
  S5_SECS=5; S5_STALL=(--stall-every 100 --stall-after-ms 1000 --stall-ms 3000)
  S6_SECS=4; S6_STORM=(--reconnect-after-ms 1500 --reconnect-within-ms 1000)
else
  S1=(10 100 1000 10000 "$MAX_SUBSCRIBERS")
  S1_SECS=10
  SATURATION=(100 1000)
  SATURATION_SECS=5
  S2_SUBSCRIBERS="$MAX_SUBSCRIBERS"; S2_SECS=60
  S3_SUBSCRIBERS=10000; S3_SUBJECTS=1000000; S3_SECS=5
  S56_SUBSCRIBERS=10000
  S5_SECS=20; S5_STALL=(--stall-every 100 --stall-after-ms 2000 --stall-ms 10000)
  S6_SECS=8; S6_STORM=(--reconnect-after-ms 3000 --reconnect-within-ms 1000)
fi
# system label, then the arguments that select it.
SYSTEMS=(
  "websocket|--system herald --transport websocket --admin $ADMIN"
  "grpc|--system herald --transport grpc --admin $ADMIN"
  "nats|--system nats --nats $NATS_ADDR"
  "jetstream|--system jetstream --nats $NATS_ADDR"
  "mqtt-qos0|--system mqtt --mqtt $MOSQUITTO_ADDR --qos 0"
  "mqtt-qos1|--system mqtt --mqtt $MOSQUITTO_ADDR --qos 1"
  "kernel|--system floor"
)

# JetStream (persistence, a push consumer per subscriber) runs where a
# scenario needs what core NATS lacks: a stalled subscriber (s5) and a
# resume (s6). Where every subscriber is a subject's (s3, s4) the floor
# cannot take part: it has no subjects. Nor where a subscriber stalls or
# reconnects (s5, s6): it has no queue and no resume. The report says so.
entry_of() {
  local e
  for e in "${SYSTEMS[@]}"; do
    if [ "${e%%|*}" = "$1" ]; then echo "$e"; fi
  done
}
CORE_SYSTEMS=()
for label in websocket grpc nats mqtt-qos0 mqtt-qos1 kernel; do CORE_SYSTEMS+=("$(entry_of "$label")"); done
SUBJECT_SYSTEMS=()
for label in websocket nats mqtt-qos0 mqtt-qos1; do SUBJECT_SYSTEMS+=("$(entry_of "$label")"); done
PERSISTENT_SYSTEMS=("${SUBJECT_SYSTEMS[@]}" "$(entry_of jetstream)")

pid_of() {
  case "$1" in
    websocket|grpc) echo "$HERALD_PID" ;;
    nats|jetstream) echo "$NATS_PID" ;;
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
    echo "{\"layout\":\"$layout\",\"round\":$round,\"commit\":\"$COMMIT\",${row#\{}" >> "$ROWS"
  else
    echo "   FAILED: $label $* (see $OUT/loadgen.err)"
  fi
}

wanted() { [[ ",$ONLY," == *",$1,"* ]]; }

IFS=, read -r -a LAYOUT_LIST <<< "$LAYOUTS"
# Rounds outside layouts: a run cut short still has every layout measured.
for round in $(seq "$FIRST_ROUND" $(( FIRST_ROUND + REPEATS - 1 ))); do
  for layout in "${LAYOUT_LIST[@]}"; do
    set_layout "$layout"
    # s1 and saturation: one subject, each size, every core system; s1 at
    # 10 msg/s, saturation as fast as the window allows.
    for s in s1 saturation; do
      wanted "$s" || continue
      if [ "$s" = s1 ]; then
        sizes=("${S1[@]}"); pace=(--rate 10 --secs "$S1_SECS")
      else
        sizes=("${SATURATION[@]}"); pace=(--rate 0 --secs "$SATURATION_SECS")
      fi
      for n in "${sizes[@]}"; do
        for entry in "${CORE_SYSTEMS[@]}"; do
          run "$layout" "$round" "$entry" --scenario "$s" --subscribers "$n" "${pace[@]}"
        done
        echo "$(date +%T) == $layout round $round: $s at $n subscribers"
      done
    done
    if wanted s2; then
      for entry in "${CORE_SYSTEMS[@]}"; do
        [ "${entry%%|*}" = grpc ] && continue
        run "$layout" "$round" "$entry" --scenario s2 --subscribers "$S2_SUBSCRIBERS" \
          --rate 1 --burst 20 --secs "$S2_SECS"
      done
      echo "$(date +%T) == $layout round $round: s2 at $S2_SUBSCRIBERS subscribers"
    fi
    for s in s3 s4; do
      wanted "$s" || continue
      choices=(uniform normal poisson zipf); patterns=()
      if [ "$s" = s4 ]; then choices=(uniform zipf); patterns=(--patterns); fi
      for choice in "${choices[@]}"; do
        for entry in "${SUBJECT_SYSTEMS[@]}"; do
          run "$layout" "$round" "$entry" --scenario "$s-$choice" --subscribers "$S3_SUBSCRIBERS" \
            --subjects "$S3_SUBJECTS" --per-subscriber 10 "${patterns[@]}" --choice "$choice" \
            --partitions 16 --rate 0 --secs "$S3_SECS"
        done
        echo "$(date +%T) == $layout round $round: $s $choice"
      done
    done
    for s in s5 s6; do
      wanted "$s" || continue
      if [ "$s" = s5 ]; then
        disturbance=(--secs "$S5_SECS" "${S5_STALL[@]}")
      else
        disturbance=(--secs "$S6_SECS" "${S6_STORM[@]}")
      fi
      for entry in "${PERSISTENT_SYSTEMS[@]}"; do
        # S5's target is against the same load undisturbed: measured
        # here, beside it, not taken from an S1 run of another day.
        if [ "$s" = s5 ]; then
          run "$layout" "$round" "$entry" --scenario s5-calm --subscribers "$S56_SUBSCRIBERS" \
            --rate 10 --secs "$S5_SECS"
        fi
        run "$layout" "$round" "$entry" --scenario "$s" --subscribers "$S56_SUBSCRIBERS" \
          --rate 10 "${disturbance[@]}"
      done
      echo "$(date +%T) == $layout round $round: $s"
    done
  done
done

"$REPORT_PY" scripts/bench_fanout_report.py "$ROWS" "$DOC" \
  --command "scripts/bench-fanout.sh $ASKED" --commit "$COMMIT" "${APPEND[@]}"
echo "report: $DOC/fanout.md"
