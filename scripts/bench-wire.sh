#!/usr/bin/env bash
# The wire benchmark (issue 5): herald against Apache Kafka over the Kafka
# protocol, one topic, one partition, 64-byte messages, data on tmpfs.
#
#   scripts/bench-wire.sh           full run (about 15 minutes), writes docs/benchmarks/wire.{md,csv,png}
#   scripts/bench-wire.sh --quick   smoke run (about 3 minutes), writes to $OUT (default /tmp/herald-bench-wire)
#
# Steps: build herald and herald-loadgen in release mode; fetch Kafka 4.3.1
# from Maven Central into bench/kafka/lib (gitignored); measure loopback TCP
# and the kernel floors (no broker: what any broker pays per message in the
# kernel for produce and consume on tmpfs); start Kafka (data in /dev/shm),
# run the load generator's suite and Kafka's own perf tools against it, stop
# it; the same against herald; write the report. Every broker started here
# is stopped here, by its PID.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

QUICK=""
[ "${1:-}" = "--quick" ] && QUICK="--quick"
OUT="${OUT:-/tmp/herald-bench-wire}"
if [ -n "$QUICK" ]; then
  REPORT_DIR="${REPORT_DIR:-$OUT/report}"
  XC_RECORDS=500000
else
  REPORT_DIR="${REPORT_DIR:-$ROOT/docs/benchmarks}"
  XC_RECORDS=5000000
fi
HERALD_ADDR="127.0.0.1:19492"
HERALD_DATA="/dev/shm/herald-bench"
LOADGEN="$ROOT/target/release/herald-loadgen"
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl

echo "== build"
cargo build --release -p herald -p herald-loadgen
"$ROOT/bench/kafka/setup.sh"
# shellcheck source=../bench/kafka/env.sh
source "$ROOT/bench/kafka/env.sh"
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || apt-get install -y fonts-dejavu-core

HERALD_PID=""
cleanup() {
  if [ -n "$HERALD_PID" ] && kill -0 "$HERALD_PID" 2>/dev/null; then
    kill "$HERALD_PID"; wait "$HERALD_PID" 2>/dev/null || true
  fi
  rm -rf "$HERALD_DATA"
  "$ROOT/bench/kafka/stop.sh" --wipe >/dev/null
}
trap cleanup EXIT

# One JSON row for the report from a tool's figures.
xc_row() {  # broker tool records_per_s mb_per_s note
  printf '{"kind":"crosscheck","broker":"%s","batch":1024,"clients":1,"acks":"1","records":0,"bytes":0,"secs":0,"msgs_per_s":%s,"mb_per_s":%s,"note":"%s: %s"}\n' \
    "$1" "$3" "$4" "$2" "$5" >> "$OUT/crosscheck.jsonl"
}

# Kafka's ProducerPerformance and ConsumerPerformance against one broker:
# 1024-record batches, one producer; then one consumer in its own group.
crosscheck() {  # broker bootstrap
  local broker=$1 bootstrap=$2 topic="xc-$1-$$" log="$OUT/xc-$1"
  echo "== cross-check with Kafka's perf tools against $broker"
  if ! timeout 60 bash -c "source '$ROOT/bench/kafka/env.sh'; ktool org.apache.kafka.tools.TopicCommand \
      --bootstrap-server $bootstrap --create --topic $topic --partitions 1 --replication-factor 1 \
      --config max.message.bytes=8388608" > "$log-topic.log" 2>&1; then
    xc_row "$broker" ProducerPerformance 0 0 "topic creation failed: $(tail -1 "$log-topic.log" | tr -d '"' | cut -c1-120)"
    return 0
  fi
  timeout 120 bash -c "source '$ROOT/bench/kafka/env.sh'; ktool org.apache.kafka.tools.ProducerPerformance \
      --bootstrap-server $bootstrap --topic $topic --num-records $XC_RECORDS --record-size 64 \
      --throughput -1 --command-property acks=1 batch.size=74813 linger.ms=5 max.request.size=8388608 \
      buffer.memory=67108864" > "$log-produce.log" 2>&1 || true
  local line; line=$(grep 'records sent' "$log-produce.log" | tail -1 || true)
  if [ -n "$line" ]; then
    xc_row "$broker" ProducerPerformance "$(echo "$line" | awk '{print $4}')" \
      "$(echo "$line" | sed -E 's/.*\(([0-9.]+) MB\/sec\).*/\1/')" "$(echo "$line" | cut -d, -f3-4 | tr -d '"')"
  else
    xc_row "$broker" ProducerPerformance 0 0 "failed: $(tail -1 "$log-produce.log" | tr -d '"\\' | cut -c1-160)"
  fi
  timeout 60 bash -c "source '$ROOT/bench/kafka/env.sh'; ktool org.apache.kafka.tools.ConsumerPerformance \
      --bootstrap-server $bootstrap --topic $topic --num-records $XC_RECORDS --group xc-$$ \
      --timeout 20000 --hide-header" > "$log-consume.log" 2>&1 || true
  # columns: start, end, MB, MB/s, records, records/s, rebalance ms, fetch ms, fetch MB/s, fetch records/s
  line=$(grep -E '^[0-9]{4}-' "$log-consume.log" | tail -1 || true)
  if [ -n "$line" ]; then
    xc_row "$broker" ConsumerPerformance "$(echo "$line" | awk -F', *' '{print $10}')" \
      "$(echo "$line" | awk -F', *' '{print $9}')" "fetch-only figures, $(echo "$line" | awk -F', *' '{print $5}') records read"
  else
    xc_row "$broker" ConsumerPerformance 0 0 "failed: $(grep -iE 'error|exception' "$log-consume.log" | head -1 | tr -d '"\\' | cut -c1-160)"
  fi
}

echo "== loopback TCP"
"$LOADGEN" loopback --secs 2 --out "$OUT/loopback.jsonl"

echo "== kernel floors"
"$LOADGEN" floor --dir /dev/shm --secs 2 --out "$OUT/floor.jsonl"

echo "== Apache Kafka"
"$ROOT/bench/kafka/stop.sh" --wipe >/dev/null
"$ROOT/bench/kafka/start.sh"
KAFKA_PID=$(cat "$KAFKA_RUN/kafka.pid")
"$LOADGEN" suite $QUICK --broker kafka --bootstrap "$BOOTSTRAP" --broker-pid "$KAFKA_PID" \
  --out "$OUT/kafka.jsonl"
crosscheck kafka "$BOOTSTRAP"
"$ROOT/bench/kafka/stop.sh" --wipe

echo "== herald"
rm -rf "$HERALD_DATA"
ADMIN_FLAGS=()  # keep off the default admin and push ports, which another herald may hold
"$ROOT/target/release/herald" serve --help | grep -q -- --admin-listen && ADMIN_FLAGS=(--admin-listen 127.0.0.1:0)
"$ROOT/target/release/herald" serve --help | grep -q -- --push-listen && ADMIN_FLAGS+=(--push-listen 127.0.0.1:0)
"$ROOT/target/release/herald" serve --data-dir "$HERALD_DATA" --kafka-listen "$HERALD_ADDR" \
  "${ADMIN_FLAGS[@]}" > "$OUT/herald.log" 2>&1 &
HERALD_PID=$!
for _ in $(seq 1 50); do
  (exec 3<>"/dev/tcp/${HERALD_ADDR%:*}/${HERALD_ADDR#*:}") 2>/dev/null && break
  sleep 0.2
done
"$LOADGEN" suite $QUICK --broker herald --bootstrap "$HERALD_ADDR" --broker-pid "$HERALD_PID" \
  --reference "$OUT/kafka.jsonl" --out "$OUT/herald.jsonl"
crosscheck herald "$HERALD_ADDR"
kill "$HERALD_PID"; wait "$HERALD_PID" 2>/dev/null || true
HERALD_PID=""
rm -rf "$HERALD_DATA"

echo "== report"
"$LOADGEN" report --results "$OUT/loopback.jsonl" "$OUT/floor.jsonl" "$OUT/kafka.jsonl" \
  "$OUT/herald.jsonl" "$OUT/crosscheck.jsonl" --out-dir "$REPORT_DIR" --command "scripts/bench-wire.sh $QUICK"
echo "rows: $OUT/*.jsonl; report: $REPORT_DIR/wire.md"
