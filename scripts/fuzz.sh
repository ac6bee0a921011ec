#!/usr/bin/env bash
# Runs the request-decoding fuzz target for a bounded time.
#   scripts/fuzz.sh SECONDS
# Needs the nightly toolchain and cargo-fuzz (installed here if missing).
# The seed corpus is copied to a scratch directory so a run never adds
# files to the repository; crashes land in fuzz/artifacts/.
set -euo pipefail

seconds="${1:?usage: scripts/fuzz.sh SECONDS}"
case "$seconds" in
  ''|*[!0-9]*) echo "SECONDS must be a whole number, got '$seconds'" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz
fi

corpus="$(mktemp -d)"
trap 'rm -rf "$corpus"' EXIT
cp corpus/request_decode/* "$corpus/"

# -rss_limit_mb also caps single allocations, so a hostile count that
# turns into a multi-gigabyte reservation is reported as a crash.
cargo +nightly fuzz run request_decode "$corpus" -- \
  -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
