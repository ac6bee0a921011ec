#!/usr/bin/env bash
# The push benchmark: herald alone (comparisons with other brokers are a
# later issue), every scenario run REPEATS times against one broker on
# /dev/shm, and a table of medians.
#
#   scripts/bench-push.sh [--quick] [--repeats N] [--only fanout,rounds,subjects,memory,features,priority,catch-up]
#
# Scenarios (see `herald-loadgen push --help`):
#   fanout    seed 002's table: 10 to 10,000 subscribers of one subject at
#             10 msg/s, publish-to-deliver latency and dropped subscribers,
#             over gRPC, over WebSocket, and with no broker at all (the
#             floor: plain threads writing to as many loopback sockets);
#   rounds    seed 003's round: 2,000 to ~18,000 clients, 20 messages each
#             per round on their own subject, the share of clients late by 1 s;
#   subjects  1M subjects against 1 and against 16 per connection, 100k
#             subscriptions, the same deliveries: records/s and broker CPU
#             per delivery;
#   memory    broker memory per idle session and per subscription;
#   features  what a filter (10% matching), priority (1% high) and expiry
#             (5% expired) cost the broker against plain delivery;
#   priority  high-priority latency under a normal flood against idle;
#   catch-up  bytes a catch-up for one subject among 100,000 in a partition
#             reads per byte it delivers, with the subject filters and
#             without, for two batch sizes;
# features also runs plain delivery with the subject filters off (they are
# kept once a topic is subscribed): what the indexer costs.
# --quick runs each at a small scale (a minute in all). Rows go to
# $OUT/push.jsonl (default /tmp/herald-bench-push) and the table to
# $OUT/push.md; the broker started here is stopped here, by its PID.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

QUICK=0
REPEATS=3
ONLY="fanout,rounds,subjects,memory,features,priority,catch-up"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-/tmp/herald-bench-push}"
DATA="/dev/shm/herald-bench-push"
mkdir -p "$OUT"
ROWS="$OUT/push.jsonl"
rm -f "$ROWS"

# Each connection costs a file on both sides.
ulimit -n "$(ulimit -Hn)"
source "$ROOT/scripts/lib/push-herald.sh"
trap stop_herald EXIT
start_herald
PID="$HERALD_PID"

run() {  # scenario args...
  for _ in $(seq 1 "$REPEATS"); do
    "$LOADGEN" push "$@" --push "$PUSH" --bootstrap "$KAFKA" --out "$ROWS" >/dev/null
  done
  echo "   $*: done"
}

# The load generator and the broker share this machine's open-file limit
# per process; leave room for each side's own files.
MAX_CLIENTS=$(( $(ulimit -n) - 1500 ))
if [ "$QUICK" = 1 ]; then
  FANOUT=(10 100 1000)
  FANOUT_SECS=3
  ROUNDS_CLIENTS=(500 2000)
  ROUNDS=3
  SUBJECTS=(--subjects 100000 --subscriptions 10000 --connections 20 --records 400000)
  MEMORY=(--connections 500 --subscriptions-per-connection 20)
  FEATURE_RECORDS=200000
  PRIORITY_SECS=3
  CATCH_UP_RECORDS=200000
else
  FANOUT=(10 50 100 250 500 750 1000 10000)
  FANOUT_SECS=10
  ROUNDS_CLIENTS=(2000 10000 "$MAX_CLIENTS")
  ROUNDS=10
  # 16M records (1.6M deliveries): at 4M, the CPU clock's 10 ms ticks and
  # the machine's noise moved many / few by 0.3 between runs.
  SUBJECTS=(--subjects 1000000 --subscriptions 100000 --connections 100 --records 16000000)
  MEMORY=(--connections 2000 --subscriptions-per-connection 50)
  FEATURE_RECORDS=2000000
  PRIORITY_SECS=10
  CATCH_UP_RECORDS=2000000
fi

wanted() { [[ ",$ONLY," == *",$1,"* ]]; }

if wanted fanout; then
echo "== fanout (seed 002)"
for n in "${FANOUT[@]}"; do
  run fanout --system floor --subscribers "$n" --rate 10 --secs "$FANOUT_SECS"
done
for transport in grpc websocket; do
  for n in "${FANOUT[@]}"; do
    run fanout --subscribers "$n" --rate 10 --secs "$FANOUT_SECS" --transport "$transport" --broker-pid "$PID"
  done
done
fi
if wanted rounds; then
  echo "== rounds (seed 003)"
  for c in "${ROUNDS_CLIENTS[@]}"; do
    run rounds --clients "$c" --messages 20 --rounds "$ROUNDS"
  done
fi
if wanted subjects; then
  echo "== subjects"
  for keys in one few many; do
    run subjects --keys "$keys" "${SUBJECTS[@]}" --broker-pid "$PID"
  done
fi
if wanted features; then
  echo "== features"
  for feature in plain filter priority expiry; do
    run features --feature "$feature" --records "$FEATURE_RECORDS" --broker-pid "$PID"
  done
  # What the subject indexer adds to plain delivery (on above, by default).
  run features --feature plain --subject-filters false --records "$FEATURE_RECORDS" --broker-pid "$PID"
fi
if wanted priority; then
  echo "== priority"
  run priority --secs "$PRIORITY_SECS"
  run priority --flood --secs "$PRIORITY_SECS"
  run priority --flood --apart --secs "$PRIORITY_SECS"
  # Floods the machine has room for: how far below saturation the target
  # holds.
  for rate in 100000 300000 600000; do
    run priority --flood --flood-rate "$rate" --secs "$PRIORITY_SECS"
  done
fi
if wanted catch-up; then
  echo "== catch-up"
  for batch in 1024 4096; do
    run catch-up --admin "$ADMIN" --subjects 100000 --records "$CATCH_UP_RECORDS" --batch-records "$batch" --probes 5
  done
fi
if wanted memory; then
  echo "== memory"
  run memory --broker-pid "$PID" --admin "$ADMIN" --transport grpc "${MEMORY[@]}"
  run memory --broker-pid "$PID" --admin "$ADMIN" --transport websocket "${MEMORY[@]}"
fi

python3 "$ROOT/scripts/bench_push_table.py" "$ROWS" > "$OUT/push.md"
cat "$OUT/push.md"
