#!/usr/bin/env bash
# Runs the quota tests against Apache Kafka 4.3.1 and herald, one after the
# other, with the same clients (confluent-kafka, the Java producer, kcat)
# offering 5x a 512 KiB/s producer_byte_rate, and writes what each broker
# accepted (every one-second window, the 10 s window, the first second)
# and what each client's metrics said to one JSON line per case:
#
#   scripts/quotas-vs-kafka.sh [report.jsonl]     (default: target/quotas-vs-kafka.jsonl)
#
# Kafka's cases do not assert the accuracy herald's do: the figures are
# the comparison. Needs what scripts/install-test-deps.sh installs (it is
# run first); Kafka runs from the jars the compat suite fetched.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
REPORT="${1:-$ROOT/target/quotas-vs-kafka.jsonl}"
./scripts/install-test-deps.sh
cargo build --release -p herald
mkdir -p "$(dirname "$REPORT")"
: >"$REPORT"
status=0
HERALD_QUOTA_REPORT="$REPORT" HERALD_COMPAT_KAFKA_LIB="$ROOT/bench/kafka/lib" \
  .venv/bin/pytest -q -s tests/compat/test_quota_enforcement.py || status=$?
HERALD_QUOTA_REPORT="$REPORT" \
  .venv/bin/pytest -q -s tests/compat/test_quota_enforcement.py || status=$?
python3 - "$REPORT" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"{'broker':8} {'client':16} {'10 s window':>12} {'first second':>13} {'one-second windows':>24}")
for r in rows:
    low, high = min(r["seconds"]) / r["quota"], max(r["seconds"]) / r["quota"]
    print(f"{r['broker']:8} {r['client']:16} {r['ratio_10s']:>11.3f}x {r['first_second_ratio']:>12.3f}x"
          f" {low:>11.3f}x to {high:.3f}x")
PY
exit $status
