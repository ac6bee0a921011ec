#!/usr/bin/env bash
# What the partition contract costs the embedded log: the same one-record
# appends and fetch-sized reads straight to a herald_log::Log and through
# herald_broker::Partition (the door the Kafka front end uses), interleaved,
# medians of --reps runs, with the ratio. About a minute.
#
#   scripts/bench-contract.sh [--reps N] [--threads 1,2] [--appends N] [--dir /dev/shm]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p herald-bench --bin herald-contract-bench
exec "${CARGO_TARGET_DIR:-target}/release/herald-contract-bench" "$@"
