#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets/*.rs) for a bounded time in all,
# SECONDS split evenly between them (at least 10 s each).
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

targets=()
for target in fuzz_targets/*.rs; do
  targets+=("$(basename "$target" .rs)")
done
each=$(( seconds / ${#targets[@]} ))
[ "$each" -ge 10 ] || each=10

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in "${targets[@]}"; do
  corpus="$scratch/$target"
  mkdir -p "$corpus"
  if [ -d "corpus/$target" ]; then
    cp "corpus/$target"/* "$corpus/"
  fi
  echo "== fuzzing $target for ${each}s"
  # -rss_limit_mb also caps single allocations, so a hostile count that
  # turns into a multi-gigabyte reservation is reported as a crash.
  cargo +nightly fuzz run "$target" "$corpus" -- \
    -max_total_time="$each" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
done
