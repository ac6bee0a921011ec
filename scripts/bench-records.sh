#!/usr/bin/env bash
# How fast herald reads records: herald-records' iterator against
# kafka-protocol's RecordBatchDecoder on the same batches (uncompressed, lz4,
# zstd; 1, 64 and 1024 records per batch), records per second per core,
# medians of --reps runs, with the ratio. About a minute.
#
#   scripts/bench-records.sh [--reps N] [--records N] [--batches 1,64,1024]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p herald-bench --bin herald-records-bench
exec "${CARGO_TARGET_DIR:-target}/release/herald-records-bench" "$@"
