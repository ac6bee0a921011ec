#!/usr/bin/env bash
# How fast online queries index a topic: ten registered filters on keys,
# headers and timestamps with four aggregates among them; ten queries with
# four aggregates each; and those with half of them on JSON fields; fed by
# the indexer's loop, against a plain decoding scan
# of the same records (uncompressed and lz4), records per second per core,
# medians of --reps runs, with the ratios. --broker adds the broker's own
# indexer thread over a real log. A minute or two.
#
#   scripts/bench-queries.sh [--reps N] [--records N] [--broker]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p herald-bench --bin herald-query-bench
exec "${CARGO_TARGET_DIR:-target}/release/herald-query-bench" "$@"
