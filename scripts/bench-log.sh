#!/usr/bin/env bash
# herald's partition-log benchmark, in one command:
#
#   scripts/bench-log.sh            # full run, about 5 minutes on 2 cores
#   scripts/bench-log.sh --quick    # smoke test, seconds, output under target/
#
# Builds crates/herald-bench in release and runs herald-log-bench with the
# given options (see --help). The full run writes docs/benchmarks/log.csv,
# log.png and log-latest.md; the method is described in docs/benchmarks/log.md.
set -euo pipefail
cd "$(dirname "$0")/.."

# The chart's text is drawn from this TrueType file (no system font library).
font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
if [ ! -f "$font" ]; then
    echo "bench-log: installing fonts-dejavu-core for the chart's text" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq fonts-dejavu-core
fi

cargo build --release -p herald-bench
exec "${CARGO_TARGET_DIR:-target}/release/herald-log-bench" "$@"
