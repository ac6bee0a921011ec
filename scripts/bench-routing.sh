#!/usr/bin/env bash
# How fast a push tailer finds a record key's subscribers: the routing
# table's batched lookup (issue 16's S3: a tenth of 1M subjects subscribed)
# against papaya and the standard HashMap on the same keys, with a million
# distinct keys and with 1,664; thread CPU per key, medians of --reps runs,
# with the ratios. Under a minute.
#
#   scripts/bench-routing.sh [--reps N] [--subjects N] [--keys N]
#   scripts/bench-routing.sh --against REV [--rounds N] [flags as above]
#
# With --against, the same program is also built against REV's routing
# table (in a temporary worktree; REV must have herald-subjects with the
# same public table API), and the two take turns for --rounds rounds
# (default 3); the medians of their table figures are printed side by side.
set -euo pipefail
cd "$(dirname "$0")/.."

against=""
rounds=3
flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --against) against="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) flags+=("$1"); shift ;;
  esac
done

target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p herald-subjects --example routing-bench
here="$target/release/examples/routing-bench"
if [ -z "$against" ]; then
  exec "$here" "${flags[@]}"
fi

tree="$(mktemp -d /tmp/herald-routing-against.XXXXXX)"
cleanup() {
  git worktree remove --force "$tree" >/dev/null 2>&1 || true
  rm -rf "$tree"
}
trap cleanup EXIT
git worktree add --detach --force "$tree" "$against" >/dev/null
mkdir -p "$tree/crates/herald-subjects/examples"
cp crates/herald-subjects/examples/routing-bench.rs "$tree/crates/herald-subjects/examples/"
# The program's own dependencies, where REV's manifest lacks them.
manifest="$tree/crates/herald-subjects/Cargo.toml"
grep -q '^\[dev-dependencies\]' "$manifest" || printf '\n[dev-dependencies]\n' >> "$manifest"
for dep in 'papaya = "0.2"' 'libc = "0.2"' 'foldhash = "0.1"' 'smallvec = "1.13"'; do
  name="${dep%% *}"
  grep -q "^$name\b" "$manifest" || sed -i "/^\[dev-dependencies\]/a $dep" "$manifest"
done
(cd "$tree" && CARGO_TARGET_DIR="$PWD/../$(basename "$tree")-target" \
  cargo build --release -p herald-subjects --example routing-bench)
there="$tree-target/release/examples/routing-bench"
trap 'cleanup; rm -rf "$tree-target"' EXIT

declare -a here_many here_few there_many there_few
for round in $(seq 1 "$rounds"); do
  for side in there here; do
    binary="$here"; [ "$side" = there ] && binary="$there"
    line="$("$binary" "${flags[@]}" | grep '^routing ')"
    many="$(sed -E 's/.*many=([0-9.]+).*/\1/' <<<"$line")"
    few="$(sed -E 's/.*few=([0-9.]+).*/\1/' <<<"$line")"
    echo "round $round, $side: many $many ns, few $few ns per key"
    eval "${side}_many+=($many); ${side}_few+=($few)"
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
echo
echo "| table | many (ns per key) | few (ns per key) | many / few |"
echo "|---|---|---|---|"
for side in there here; do
  eval "m=\$(median \"\${${side}_many[@]}\"); f=\$(median \"\${${side}_few[@]}\")"
  label="$against"; [ "$side" = here ] && label="this checkout"
  echo "| $label | $m | $f | $(awk -v m="$m" -v f="$f" 'BEGIN {printf "%.2f", m / f}') |"
done
