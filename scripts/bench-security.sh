#!/usr/bin/env bash
# The security benchmark (issue 17): what TLS, SASL and ACLs cost on the
# produce and fetch paths, beside what TLS costs Apache Kafka on the same
# machine, and how many SCRAM logins a broker core serves.
#
#   scripts/bench-security.sh           5 runs of 5 s per point, writes docs/benchmarks/security.{md,jsonl}
#   scripts/bench-security.sh --quick   1 run of 2 s per point, writes to $OUT (default /tmp/herald-bench-security)
#
# Setups, one producer and then one fetcher on one connection each, one
# partition, 64-byte records, batches of 1 and 1024 records per request,
# data on tmpfs:
#   herald plaintext              authorization off, no ACLs (the baseline)
#   herald ssl                    TLS, authorization off
#   herald sasl_plaintext+acls    SCRAM-SHA-512, authorization on, 10,000 ACLs over 1,000 principals
#   herald sasl_ssl+acls          the same over TLS
#   kafka plaintext, kafka ssl    Apache Kafka 4.3.1, its TLS cost
# and SCRAM-SHA-512 logins per second against herald (8 connecting tasks).
# Both heralds run at once and their setups take turns, one run each per
# round (then Kafka's two, the same way), so that the machine's drift over
# the minutes of a run falls on every setup alike.
# Certificates are made per run with openssl. Every broker started here is
# stopped here, by its PID.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

QUICK=""
[ "${1:-}" = "--quick" ] && QUICK="--quick"
OUT="${OUT:-/tmp/herald-bench-security}"
if [ -n "$QUICK" ]; then
  REPORT_DIR="${REPORT_DIR:-$OUT/report}"
  SECS=2; REPEATS=1
else
  REPORT_DIR="${REPORT_DIR:-$ROOT/docs/benchmarks}"
  SECS=5; REPEATS=5
fi
LOADGEN="$ROOT/target/release/herald-loadgen"
HERALD="$ROOT/target/release/herald"
DATA="/dev/shm/herald-bench-security"
PKI="$OUT/pki"
ROWS="$OUT/security.jsonl"
export HERALD_ADMIN_PASSWORD="admin-$$-$RANDOM"
export HERALD_SASL_PASSWORD="$HERALD_ADMIN_PASSWORD"
export HERALD_BENCH_PASSWORD="bench-$$-$RANDOM"
mkdir -p "$OUT" "$REPORT_DIR"
rm -f "$ROWS"

echo "== build"
cargo build --release -p herald -p herald-loadgen
"$ROOT/bench/kafka/setup.sh"
# shellcheck source=../bench/kafka/env.sh
source "$ROOT/bench/kafka/env.sh"

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then kill "$pid"; wait "$pid" 2>/dev/null || true; fi
  done
  rm -rf "$DATA-open" "$DATA-secure"
  "$ROOT/bench/kafka/stop.sh" --wipe >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "== certificates"
rm -rf "$PKI"; mkdir -p "$PKI"
(
  cd "$PKI"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout ca.key -out ca.pem -subj "/CN=bench CA" 2>/dev/null
  echo "subjectAltName=IP:127.0.0.1" > server.ext
  openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=127.0.0.1" 2>/dev/null
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -out server.pem -extfile server.ext 2>/dev/null
  cat server.key server.pem > keystore.pem
)

wait_port() {  # addr
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on $1"; return 1
}

# herald with the listeners and settings of $1 (a TOML file), data in $2;
# its PID in STARTED.
start_herald() {  # config data log
  rm -rf "$2"
  "$HERALD" serve --data-dir "$2" --config "$1" --admin-listen 127.0.0.1:0 \
    --push-listen 127.0.0.1:0 > "$3" 2>&1 &
  STARTED=$!
  PIDS+=("$STARTED")
}

measure() {  # broker setup pid bootstrap round [flags...]
  local broker=$1 setup=$2 pid=$3 bootstrap=$4 round=$5; shift 5
  echo "== $broker $setup, round $((round + 1)) of $REPEATS"
  "$LOADGEN" security measure --broker "$broker" --setup "$setup" --broker-pid "$pid" \
    --bootstrap "$bootstrap" --secs "$SECS" --repeats 1 --first-repeat "$round" --out "$ROWS" "$@"
}

echo "== herald without authorization (plaintext, TLS), and herald with SASL and 10,000 ACLs"
cat > "$OUT/open.toml" <<TOML
kafka_listen = "127.0.0.1:19592"
[[listeners]]
name = "TLS"
listen = "127.0.0.1:19593"
protocol = "SSL"
tls_cert = "$PKI/server.pem"
tls_key = "$PKI/server.key"
TOML
cat > "$OUT/secure.toml" <<TOML
[[listeners]]
name = "SASL"
listen = "127.0.0.1:19594"
protocol = "SASL_PLAINTEXT"
[[listeners]]
name = "SASL_TLS"
listen = "127.0.0.1:19595"
protocol = "SASL_SSL"
tls_cert = "$PKI/server.pem"
tls_key = "$PKI/server.key"
[security]
authorization = true
admin_user = "admin"
TOML
start_herald "$OUT/open.toml" "$DATA-open" "$OUT/herald-open.log"; OPEN_PID=$STARTED
start_herald "$OUT/secure.toml" "$DATA-secure" "$OUT/herald-secure.log"; SECURE_PID=$STARTED
for port in 19592 19593 19594 19595; do wait_port "127.0.0.1:$port"; done
"$LOADGEN" security seed --bootstrap 127.0.0.1:19594 --sasl-user admin --principals 1000 --acls 10000
for round in $(seq 0 $((REPEATS - 1))); do
  measure herald plaintext "$OPEN_PID" 127.0.0.1:19592 "$round"
  measure herald sasl_plaintext+acls "$SECURE_PID" 127.0.0.1:19594 "$round" --sasl-user bench
  measure herald ssl "$OPEN_PID" 127.0.0.1:19593 "$round" --tls-ca "$PKI/ca.pem"
  measure herald sasl_ssl+acls "$SECURE_PID" 127.0.0.1:19595 "$round" --sasl-user bench --tls-ca "$PKI/ca.pem"
done
echo "== herald SCRAM-SHA-512 logins"
"$LOADGEN" security handshakes --broker herald --setup sasl_plaintext --broker-pid "$SECURE_PID" \
  --bootstrap 127.0.0.1:19594 --sasl-user bench --secs "$SECS" --repeats "$REPEATS" --out "$ROWS"
for pid in "$OPEN_PID" "$SECURE_PID"; do kill "$pid"; wait "$pid" 2>/dev/null || true; done
rm -rf "$DATA-open" "$DATA-secure"

echo "== Apache Kafka: plaintext and TLS"
cat > "$OUT/kafka-tls.properties" <<PROPS
listeners=PLAINTEXT://127.0.0.1:19392,CONTROLLER://127.0.0.1:19393,TLS://127.0.0.1:19394
advertised.listeners=PLAINTEXT://127.0.0.1:19392,TLS://127.0.0.1:19394
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,TLS:SSL
ssl.keystore.type=PEM
ssl.keystore.location=$PKI/keystore.pem
PROPS
"$ROOT/bench/kafka/stop.sh" --wipe >/dev/null 2>&1 || true
KAFKA_EXTRA_PROPERTIES="$OUT/kafka-tls.properties" "$ROOT/bench/kafka/start.sh"
KAFKA_PID=$(cat "$KAFKA_RUN/kafka.pid")
wait_port 127.0.0.1:19394
for round in $(seq 0 $((REPEATS - 1))); do
  measure kafka plaintext "$KAFKA_PID" 127.0.0.1:19392 "$round"
  measure kafka ssl "$KAFKA_PID" 127.0.0.1:19394 "$round" --tls-ca "$PKI/ca.pem"
done
"$ROOT/bench/kafka/stop.sh" --wipe

echo "== report"
/usr/bin/python3 "$ROOT/scripts/bench_security_report.py" "$ROWS" "$REPORT_DIR/security.md" \
  "scripts/bench-security.sh $QUICK"
cp "$ROWS" "$REPORT_DIR/security.jsonl"
echo "rows: $ROWS; report: $REPORT_DIR/security.md"
