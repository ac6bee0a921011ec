#!/usr/bin/env bash
# How fast a push tailer finds a record key's subscribers: the routing
# table's batched lookup (issue 16's S3: a tenth of 1M subjects subscribed)
# against papaya and the standard HashMap on the same keys, with a million
# distinct keys and with 1,664; thread CPU per key, medians of --reps runs,
# with the ratios. Under a minute.
#
#   scripts/bench-routing.sh [--reps N] [--subjects N] [--keys N]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p herald-bench --bin herald-routing-bench
exec "${CARGO_TARGET_DIR:-target}/release/herald-routing-bench" "$@"
