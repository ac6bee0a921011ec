#!/usr/bin/env bash
# Runs every test of herald, installing what the tests need first:
#   1. scripts/install-test-deps.sh (Python venv, kcat, Java client, chromium, cargo-fuzz)
#   2. cargo test --workspace --features herald/sql
#                                         (unit, property and integration tests; also
#                                          builds target/debug/herald with SQL, the binary
#                                          the Python suites start)
#   3. loom models of herald-log and herald-subjects (when they have loom-gated code)
#   4. scripts/fuzz.sh 60                (a bounded fuzz run, when the script exists)
#   5. pytest tests/compat               (real Kafka clients against the real binary)
#   6. pytest tests/push                 (push subscriptions: grpcio client, a real browser)
#   7. pytest tests/tools                (the benchmark reports' own arithmetic)
# Stops at the first failure with a non-zero exit code.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Python suites must test this checkout's binary, not a broker named in
# the environment (HERALD_BIN is set again below, to this build's).
unset HERALD_COMPAT_BOOTSTRAP HERALD_BIN

START_S=$SECONDS
step() {
  printf '\n==> [%4ds] %s\n' "$((SECONDS - START_S))" "$*"
}

step "install test dependencies"
./scripts/install-test-deps.sh

# The debug build carries the SQL feature (Apache DataFusion): compiling
# DataFusion once without optimization is what it costs the run, where an
# optimized build of it would take three times as long.
# HERALD_BIN: tests that start the binary (herald-testkit) use the one this
# same build made, rather than building `herald` again without the feature
# (which would replace it and compile what differs a second time).
# The Python suites start that same binary: an optimized build of its own
# would cost the run six to seven minutes, and the suites take as long
# against the debug build (measured: compat 483 s against 480 s), their
# time being the clients', the waits and the fsyncs, not the broker's code.
step "cargo test --workspace --features herald/sql"
HERALD_BIN="$PWD/target/debug/herald" cargo test --workspace --features herald/sql
export HERALD_BIN="$PWD/target/debug/herald"
export HERALD_SQL_BIN="$HERALD_BIN"

# herald-log and herald-subjects gate their loom models behind their own
# cfg name (`herald_loom`, so that dependencies with a `cfg(loom)` of their
# own, like event-listener, are not switched too); a plain `cfg(loom)` is
# accepted as well.
LOOM_CFG=""
if grep -rqs 'cfg(herald_loom)' crates/herald-log/Cargo.toml crates/herald-log/src; then
  LOOM_CFG=herald_loom
elif grep -rqs 'cfg(loom)' crates/herald-log/src; then
  LOOM_CFG=loom
fi
if [ -n "$LOOM_CFG" ]; then
  step "loom models of herald-log and herald-subjects (--cfg $LOOM_CFG)"
  RUSTFLAGS="--cfg $LOOM_CFG" CARGO_TARGET_DIR=target/loom \
    cargo test -p herald-log -p herald-subjects --release --lib loom
else
  step "loom models of herald-log: none (no loom cfg in crates/herald-log)"
fi

if [ -x scripts/fuzz.sh ]; then
  step "scripts/fuzz.sh 60"
  ./scripts/fuzz.sh 60
else
  step "fuzzing: skipped (no scripts/fuzz.sh)"
fi

# Each suite runs even when the one before failed; the first failure's
# status is the script's.
status=0
for suite in tests/compat tests/push tests/tools; do
  step "pytest $suite"
  set +e
  # The slowest tests are listed, to see where the run's time goes.
  .venv/bin/python -m pytest --durations=15 "$suite"
  code=$?
  set -e
  if [ "$code" = 5 ]; then
    echo "pytest collected no tests in $suite: that is a failure" >&2
  fi
  if [ "$status" = 0 ]; then
    status=$code
  fi
done
# On success pytest's summary stays the last line of the output.
exit "$status"
