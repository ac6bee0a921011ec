#!/usr/bin/env bash
# Where herald's CPU goes under one fan-out scenario: starts herald (tmpfs,
# pinned to CPU 0, the load generator on CPU 1, as bench-fanout.sh's
# pinned layout), records the broker with `perf record -g` while the
# scenario runs, and prints the split between kernel and herald and the
# hottest functions. The arguments after the name are the scenario's
# (`herald-loadgen push fanout ...`); the herald-specific ones are added.
#
#   scripts/profile-fanout.sh NAME [fanout arguments...]
#   scripts/profile-fanout.sh saturation-1000 --subscribers 1000 --rate 0 --secs 8
#   scripts/profile-fanout.sh s1-10000 --subscribers 10000 --rate 10 --secs 10
#   scripts/profile-fanout.sh s3-zipf --subscribers 10000 --subjects 1000000 \
#     --per-subscriber 10 --choice zipf --partitions 16 --rate 0 --secs 5
#
# Writes $OUT/NAME.perf.data and $OUT/NAME.txt (default
# /tmp/herald-profile-fanout). Needs `perf` (Debian's linux-perf).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
NAME="${1:?usage: scripts/profile-fanout.sh NAME [fanout arguments...]}"
shift
OUT="${OUT:-/tmp/herald-profile-fanout}"
DATA="/dev/shm/herald-profile-fanout"
mkdir -p "$OUT"
command -v perf >/dev/null || { echo "perf is missing (apt-get install linux-perf)" >&2; exit 2; }
ulimit -n "$(ulimit -Hn)"

source "$ROOT/scripts/lib/push-herald.sh"
PERF_PID=""
cleanup() {
  if [ -n "$PERF_PID" ] && kill -0 "$PERF_PID" 2>/dev/null; then kill -INT "$PERF_PID"; wait "$PERF_PID" || true; fi
  stop_herald
}
trap cleanup EXIT
start_herald
taskset -a -cp 0 "$HERALD_PID" >/dev/null

perf record -F 999 -g -p "$HERALD_PID" -o "$OUT/$NAME.perf.data" >/dev/null 2>&1 &
PERF_PID=$!
taskset -c 1 "$LOADGEN" push fanout --system herald --transport websocket \
  --push "$PUSH" --bootstrap "$KAFKA" --admin "$ADMIN" --broker-pid "$HERALD_PID" \
  --scenario "$NAME" "$@" > "$OUT/$NAME.row.json"
kill -INT "$PERF_PID"
wait "$PERF_PID" || true
PERF_PID=""

{
  echo "# $NAME: herald-loadgen push fanout $*"
  echo
  /usr/bin/python3 - "$OUT/$NAME.row.json" <<'EOF'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
rate = r["published"] / r["publish_secs"] if r["publish_secs"] else 0
print(f"messages/s {rate:,.0f}, deliveries/s {r['deliveries_per_sec']:,.0f}, "
      f"CPU ns/delivery {r['broker_ns_per_delivery'] or 0:,.0f}, ns/message {r['broker_ns_per_message'] or 0:,.0f}, "
      f"p50 {r['p50_us'] / 1000:.2f} ms, p99 {r['p99_us'] / 1000:.2f} ms, lost {r['lost']}")
EOF
  echo
  echo "## Where the samples are (the whole run, setup included)"
  perf report -i "$OUT/$NAME.perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -6
  echo
  echo "## Hottest functions (self time)"
  perf report -i "$OUT/$NAME.perf.data" --no-children --sort sym --stdio -g none 2>/dev/null \
    | grep -E '^ +[0-9]' | head -30
} | tee "$OUT/$NAME.txt"
