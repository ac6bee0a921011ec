#!/usr/bin/env bash
# A/B of herald against itself: the wire load generator's suite run against
# the herald of an earlier commit and the herald of this checkout, in
# alternating rounds on the same machine, and a table of each point's
# median figures, before and after, with the spread across rounds.
#
#   scripts/bench-ab.sh BASE_REV [--rounds N] [--base-build-args ARGS] [--quick] [suite options...]
#
# --base-build-args adds cargo arguments to the base's build: with BASE_REV
# HEAD and "--no-default-features" it measures what compiling clustering in
# costs the single node (`scripts/bench-ab.sh HEAD --base-build-args
# --no-default-features --rounds 3 --quick`).
# For example `scripts/bench-ab.sh 498fc8e --rounds 3` (about 15 minutes a
# round for the full plan). Suite options (see `herald-loadgen suite --help`,
# for example `--batches 1,1024 --publishers 1,8`) narrow the plan. The
# latency points of both offer the load of a calibration run of BASE_REV (half
# of its maximum), so before and after are measured at the same load. Rows go
# to $OUT (default /tmp/herald-bench-ab); every broker started here is
# stopped here, by its PID.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

BASE="${1:?usage: scripts/bench-ab.sh BASE_REV [--rounds N] [--quick] [suite options...]}"
shift
ROUNDS=2
SUITE_ARGS=()
BASE_BUILD_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --base-build-args) read -r -a BASE_BUILD_ARGS <<< "$2"; shift 2 ;;
    *) SUITE_ARGS+=("$1"); shift ;;
  esac
done
OUT="${OUT:-/tmp/herald-bench-ab}"
BASE_DIR="$ROOT/target/ab-base"
ADDR="127.0.0.1:19493"
DATA="/dev/shm/herald-bench-ab"
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl

echo "== build $BASE (in $BASE_DIR) and this checkout"
base_commit=$(git rev-parse --verify "$BASE^{commit}")
rm -rf "$BASE_DIR/src"
git worktree prune
git worktree add --detach "$BASE_DIR/src" "$base_commit" >/dev/null
CARGO_TARGET_DIR="$BASE_DIR/target" cargo build --release -p herald --manifest-path "$BASE_DIR/src/Cargo.toml" "${BASE_BUILD_ARGS[@]}"
git worktree remove --force "$BASE_DIR/src"
cargo build --release -p herald -p herald-loadgen
BEFORE="$BASE_DIR/target/release/herald"
AFTER="$ROOT/target/release/herald"
LOADGEN="$ROOT/target/release/herald-loadgen"

PID=""
cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill "$PID"; wait "$PID" 2>/dev/null || true
  fi
  rm -rf "$DATA"
}
trap cleanup EXIT

run() {  # binary label out-file suite-args...
  local bin=$1 label=$2 out=$3
  shift 3
  rm -rf "$DATA"
  local push_flags=()  # older binaries have no push listener
  "$bin" serve --help | grep -q -- --push-listen && push_flags=(--push-listen 127.0.0.1:0)
  "$bin" serve --data-dir "$DATA" --kafka-listen "$ADDR" --admin-listen 127.0.0.1:0 \
    "${push_flags[@]}" > "$OUT/$label.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 50); do
    (exec 3<>"/dev/tcp/${ADDR%:*}/${ADDR#*:}") 2>/dev/null && break
    sleep 0.2
  done
  "$LOADGEN" suite --broker "$label" --bootstrap "$ADDR" --broker-pid "$PID" \
    --repeats 1 --out "$out" "$@"
  kill "$PID"; wait "$PID" 2>/dev/null || true
  PID=""
}

echo "== calibration: $BASE at full speed (the latency points' offered load)"
run "$BEFORE" before "$OUT/calibration.jsonl" --latency-batches --subscribers "${SUITE_ARGS[@]}"

for round in $(seq 1 "$ROUNDS"); do
  for side in before after; do
    bin=$BEFORE; [ "$side" = after ] && bin=$AFTER
    echo "== round $round of $ROUNDS: $side"
    run "$bin" "$side" "$OUT/$side.jsonl" --reference "$OUT/calibration.jsonl" "${SUITE_ARGS[@]}"
  done
done

echo "== comparison ($BASE${BASE_BUILD_ARGS[*]:+ built with ${BASE_BUILD_ARGS[*]}} -> $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes'))"
python3 "$ROOT/scripts/bench_ab_table.py" "$OUT/before.jsonl" "$OUT/after.jsonl" | tee "$OUT/ab.md"
