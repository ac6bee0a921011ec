#!/usr/bin/env bash
# The flow-control evaluation (issue 18, seed 004's chapter 5 method).
#
#   scripts/bench-flow.sh              the durable regime: all nine cells and both steps; writes docs/benchmarks/flow-durable.{md,png} (about 65 min)
#   scripts/bench-flow.sh --memory     the first pass's regime (tmpfs, acks=1, 8 publishers x 8 requests): writes docs/benchmarks/flow-memory.{md,png}
#   scripts/bench-flow.sh --quick      2 s per run, one round, one cell and the demand step (too short for settle times), writes to $OUT (default /tmp/herald-bench-flow)
#   scripts/bench-flow.sh --interleaved  the durable regime's nine cells, every setup in turn inside one broker run per cell (about 48 min); writes docs/benchmarks/flow-interleaved.md
#   scripts/bench-flow.sh --interleaved --quick  one cell, three cycles of 2 s turns, to $OUT
#   ROUNDS=N STEP_ROUNDS=M             rounds of the comparison (default 6) and of each step (default 3)
#   SLICE=S CYCLES=C SKIP=K            interleaved: whole seconds of a turn (default 4), turns of each setup (default: one Williams square plus the warm-up, 9), seconds of each turn not counted (default 1)
#   INTERLEAVE_LIMITS="256 512"        interleaved: the fixed limits compared (default 256 512 1024 2048)
#   CELL_SUBJECTS="16" CELL_CHOICES="uniform"  the cells run (default: 1 16 256 and uniform normal poisson)
#   STEPS_ONLY=1                       only the steps: the sweep's fixed limits on 16 subjects uniform (to pick the reference), no comparison; writes flow-durable-steps.{md,png} (about 15 min)
#   CAPACITY=quota|cpu|disk            the capacity step's kind (default quota where a cgroup cpu controller is writable, else cpu; disk: durable regime only)
#   QUOTA_SHARE=F                      CAPACITY=quota: the share of one core the broker keeps (default 0.5)
#   DISK_HOG_THREADS=N                 CAPACITY=disk: threads of the disk capacity step (default 1)
#
# Durable regime (the default): the broker fsyncs before it acknowledges
# (--flush every-append) onto a disk directory, producers ask acks=-1, so
# the broker is the bottleneck (about 240,000 records/s here, where the
# load generator can offer ten times that): 32 connections with 16
# requests of 16 records each in flight (8,192 records, 30 times the knee
# of throughput against latency, which is about 2 requests per publisher
# with 8 publishers). Each request's subject (topic: 1, 16 or 256) is
# drawn uniformly, normally or by Poisson; every 20,000 records answered
# make one point; a run lasts 6 s, of which the first 2 are warm-up.
#
# Two phases, because on this shared machine one setup's runs spread by
# 10-25% and the best of several noisy figures is biased upwards (picked
# for its luck, it would not repeat):
# 1. The sweep, once per cell: the gate off and fixed limits of 256 to
#    4,096 records. The two fixed limits with the most goodput go on.
# 2. The comparison, ROUNDS rounds per cell: each round runs those two
#    fixed limits, the gate off and the three controllers (last-three-
#    points, adaptive, gradient, starting at 100) in the order of a row of
#    a Williams square: over six rounds every setup runs once in each
#    position and follows every other setup once, so neither a slow first
#    run nor what the run before left on the disk favours one setup. The
#    reference is the sweep's best fixed limit (picking the better of the
#    two by these same runs would favour the luckier); each setup is
#    compared with it round by round (the same minutes of the machine),
#    and the report gives the median of those ratios.
# Interleaved (--interleaved), one broker run per cell takes every setup
# in turn (the gate off, the fixed limits, the three controllers),
# switching the flow control over the admin API every SLICE seconds, for
# CYCLES turns each: the setups compared share the broker, its files and
# the minutes of the machine, which separate runs do not (docs/flow-
# control.md, third pass). Each cycle takes the setups in the order of a
# row of a Williams square (herald-loadgen's flow_interleave.rs); a
# controller carries on in each turn where its last ended, limit and
# history; the first cycle is its warm-up and is not counted, nor the
# first SKIP seconds of any turn (what the setup before left in flight
# drains in well under one).
# Then, on 16 subjects uniform, for each controller and the reference
# fixed limit, STEP_ROUNDS rounds of 30 s with a step at 15 s (time for
# the controllers, which start at 100, to settle first): a demand step
# across the knee (8 publishers with 4 requests in flight, three quarters
# of them starting at the step: 128 to 512 records, above where the seed's
# algorithms hold their limit before it) and a capacity step that takes
# part of what the broker leans on, of the kind CAPACITY says (the points
# carry it as the label capacity=quota|cpu|disk):
# - quota (the default in both regimes): a CPU quota halves the broker's
#   core. Each capacity-step run gets a cgroup of its own (cgroup v1:
#   /sys/fs/cgroup/cpu/herald-bench-flow-$$; cgroup v2, where that is what
#   has the cpu controller: herald-bench-flow-$$ under its root), the
#   broker goes into it right after it starts, and at the step the load
#   generator writes the quota (v1 cpu.cfs_quota_us, v2 cpu.max:
#   QUOTA_SHARE of the period); the cgroup is removed when the broker
#   stops, and on exit. Where no cgroup cpu controller is writable (not
#   root, no such hierarchy), the default falls back to cpu, saying so.
#   On this machine the broker is bound by its own core, in the durable
#   regime too (its fsyncs are kernel time on that core; a disk hog of
#   7,800 fdatasyncs/s left its goodput unchanged), and a quota caps all
#   its threads together, which a busy thread does not.
# - cpu: a busy thread pinned to the broker's core. The scheduler gives
#   it one thread's share against the broker's many, so it takes far
#   less than half (kept for comparison with the first passes).
# - disk (durable regime only, for a machine whose disk is the limit):
#   DISK_HOG_THREADS threads of the load generator (on its core) write a
#   4 KiB block and fdatasync it, over and over, in $OUT/disk-hog beside
#   the broker's data (same disk; each overwrites its own 64 MiB region,
#   removed at the end of the run), and the points carry their sync
#   count.
# STEPS_ONLY=1 runs only the steps, after the sweep of 16 subjects
# uniform's fixed limits that picks the reference. The broker runs on
# core 0, the load generator on core 1. Every broker started here is
# stopped here, by its PID.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
source "$ROOT/scripts/flow-broker.sh"

QUICK=""; REGIME=durable; INTERLEAVED=""
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --memory) REGIME=memory ;;
    --interleaved) INTERLEAVED=1 ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-/tmp/herald-bench-flow}"
if [ "$REGIME" = memory ]; then
  # The first pass: data on tmpfs, acks=1, 8 publishers x 8 requests.
  DATA="/dev/shm/herald-bench-flow"; FLUSH=never; ACKS=1
  PUBLISHERS=8; IN_FLIGHT=8; STEP_PUBLISHERS=8; STEP_IN_FLIGHT=8
  LIMITS=(128 256 512 1024)
else
  DATA="$OUT/data"; FLUSH=every-append; ACKS=-1
  PUBLISHERS=32; IN_FLIGHT=16; STEP_PUBLISHERS=8; STEP_IN_FLIGHT=4
  LIMITS=(256 512 1024 2048 4096)
fi
if [ -n "$QUICK" ]; then
  REPORT_DIR="${REPORT_DIR:-$OUT/report}"
  SECS=2; STEP_SECS=4; ROUNDS=1; STEP_ROUNDS=1
  SUBJECTS=(16); CHOICES=(uniform); LIMITS=(512 1024)
else
  REPORT_DIR="${REPORT_DIR:-$ROOT/docs/benchmarks}"
  SECS=6; STEP_SECS=30; ROUNDS="${ROUNDS:-6}"; STEP_ROUNDS="${STEP_ROUNDS:-3}"
  SUBJECTS=(${CELL_SUBJECTS:-1 16 256}); CHOICES=(${CELL_CHOICES:-uniform normal poisson})
fi
CONTROLLERS=(last-three-points adaptive gradient)
mkdir -p "$OUT" "$REPORT_DIR"

# The CPU quota step's cgroup: QUOTA_PARENT is where it is made (a
# directory of the cpu controller, v1 or v2), QUOTA_DIR its path,
# QUOTA_CGROUP set while it exists.
QUOTA_PARENT=""; QUOTA_DIR=""; QUOTA_CGROUP=""
# Sets QUOTA_PARENT to a cgroup directory under which a cgroup with a
# writable CPU quota can be made, trying one; fails (saying why on
# stderr) where there is none.
find_quota_parent() {
  local v1=/sys/fs/cgroup/cpu root candidates=()
  [ -f "$v1/cpu.cfs_quota_us" ] && candidates+=("$v1")
  # cgroup v2: its root, or the hybrid layout's unified one, if it has the
  # cpu controller enabled for its children (this script does not enable
  # it: that would change the machine's cgroup setup).
  for root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    [ -f "$root/cgroup.subtree_control" ] && grep -qw cpu "$root/cgroup.subtree_control" \
      && candidates+=("$root")
  done
  if [ "${#candidates[@]}" = 0 ]; then
    echo "no cgroup cpu controller: neither /sys/fs/cgroup/cpu/cpu.cfs_quota_us (v1) nor a cgroup2 root with cpu in cgroup.subtree_control (v2)" >&2
    return 1
  fi
  local probe
  for root in "${candidates[@]}"; do
    probe="$root/herald-bench-flow-probe-$$"
    if mkdir "$probe" 2>/dev/null; then
      local ok=""
      { [ -w "$probe/cpu.cfs_quota_us" ] || [ -w "$probe/cpu.max" ]; } && [ -w "$probe/cgroup.procs" ] && ok=1
      rmdir "$probe"
      if [ -n "$ok" ]; then
        QUOTA_PARENT=$root; QUOTA_DIR="$root/herald-bench-flow-$$"
        return 0
      fi
    fi
  done
  echo "no writable cgroup cpu controller: cannot make a cgroup with a writable CPU quota under ${candidates[*]} (not root?)" >&2
  return 1
}
# Makes the capacity-step run's cgroup, afresh (no quota left from the
# last run).
make_cgroup() {
  remove_cgroup
  mkdir "$QUOTA_DIR"
  # Only once made here: the trap removes only what this run made.
  QUOTA_CGROUP=$QUOTA_DIR
}
# Puts the running broker in it.
enter_cgroup() {
  echo "$PID" >"$QUOTA_CGROUP/cgroup.procs"
}
# Removes it, once the broker in it has stopped (rmdir of a cgroup whose
# last process just exited can fail for a moment: tried for a second).
remove_cgroup() {
  [ -n "$QUOTA_CGROUP" ] || return 0
  local dir=$QUOTA_CGROUP
  QUOTA_CGROUP=""
  [ -d "$dir" ] || return 0
  for _ in $(seq 10); do
    rmdir "$dir" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "could not remove the cgroup $dir: $(cat "$dir/cgroup.procs" 2>/dev/null | wc -l) process(es) left in it" >&2
}

# The capacity step's kind (only the full steps have one).
if [ -n "$INTERLEAVED$QUICK" ]; then
  CAPACITY=none
elif [ -z "${CAPACITY:-}" ]; then
  if find_quota_parent; then
    CAPACITY=quota
  else
    echo "CAPACITY: falling back to cpu (a busy thread on the broker's core, which takes far less than half of it); run as root where a cgroup cpu controller is mounted for the CPU quota step" >&2
    CAPACITY=cpu
  fi
elif [ "$CAPACITY" = quota ]; then
  find_quota_parent || { echo "CAPACITY=quota: no cgroup to put the quota on" >&2; exit 2; }
fi
case "$CAPACITY" in
  quota)
    # The same path each run: made and removed around each capacity-step run.
    CAPACITY_STEP=(--quota-cgroup "$QUOTA_DIR" --quota-share "${QUOTA_SHARE:-0.5}" --label capacity=quota)
    CAPACITY_AT=--quota-at
    echo "capacity step: a CPU quota of ${QUOTA_SHARE:-0.5} of a core on the broker's cgroup under $QUOTA_PARENT" >&2 ;;
  cpu)
    CAPACITY_STEP=(--hog-cpu 0 --label capacity=cpu)
    CAPACITY_AT=--hog-at ;;
  disk)
    if [ "$REGIME" = memory ]; then
      echo "CAPACITY=disk: the memory regime's data is on tmpfs, which a disk hog does not touch" >&2; exit 2
    fi
    # Beside $DATA, on the same disk; not under it (stop_broker deletes $DATA).
    DISK_HOG_DIR="$OUT/disk-hog"
    mkdir -p "$DISK_HOG_DIR"
    CAPACITY_STEP=(--disk-hog-dir "$DISK_HOG_DIR" --disk-hog-threads "${DISK_HOG_THREADS:-1}" --label capacity=disk)
    CAPACITY_AT=--disk-hog-at ;;
  none) ;;
  *) echo "CAPACITY=$CAPACITY: expected quota, cpu or disk" >&2; exit 2 ;;
esac
POINTS="$OUT/flow-$REGIME.jsonl"
: >"$POINTS"

cargo build --release -p herald -p herald-loadgen
# The disk hog's files too: a load generator stopped by a signal leaves
# them (up to 64 MiB a thread).
trap 'stop_broker || true; remove_cgroup; [ -z "${DISK_HOG_DIR:-}" ] || rm -rf "$DISK_HOG_DIR"' EXIT

# run CONTROLLER LIMIT SUBJECTS CHOICE SECS PUBLISHERS IN_FLIGHT [loadgen args...]
# With IN_CGROUP=1 (the quota step), the broker runs in a cgroup of its
# own, made before it starts and removed after it stops.
run() {
  local controller=$1 limit=$2 subjects=$3 choice=$4 secs=$5 publishers=$6 in_flight=$7; shift 7
  local in_cgroup=${IN_CGROUP:-}
  if [ -n "$in_cgroup" ]; then make_cgroup; fi
  start_broker "$controller" "$limit"
  if [ -n "$in_cgroup" ]; then enter_cgroup; fi
  echo "== $controller limit=$limit subjects=$subjects $choice $*" >&2
  taskset -c 1 "$LOADGEN" flow --bootstrap 127.0.0.1:29092 --admin 127.0.0.1:29093 \
    --subjects "$subjects" --choice "$choice" --secs "$secs" --publishers "$publishers" \
    --in-flight "$in_flight" --acks "$ACKS" \
    --label "controller=$controller" --label "start_limit=$limit" "$@" --out "$POINTS"
  stop_broker
  if [ -n "$in_cgroup" ]; then remove_cgroup; fi
}

if [ -n "$INTERLEAVED" ]; then
  # Four fixed limits, so that the setups are eight, an even number: a
  # Williams square of eight rows, and the default cycles are one square
  # after the warm-up cycle. 4,096 is left out: half of what the
  # producers hold in flight (8,192), it gates little more than the gate
  # off does, which is compared anyway.
  LIMITS=(${INTERLEAVE_LIMITS:-256 512 1024 2048})
  [ -n "$QUICK" ] && LIMITS=(512 1024)
  setups_n=$(( ${#LIMITS[@]} + 1 + ${#CONTROLLERS[@]} ))
  rows=$setups_n; [ $(( setups_n % 2 )) = 1 ] && rows=$(( 2 * setups_n ))
  SLICE="${SLICE:-4}"; CYCLES="${CYCLES:-$(( rows + 1 ))}"; SKIP="${SKIP:-1}"
  [ -n "$QUICK" ] && { SLICE=2; CYCLES=3; SKIP=0.5; }
  POINTS="$OUT/flow-interleaved.jsonl"
  : >"$POINTS"
  setups="off"
  for limit in "${LIMITS[@]}"; do setups+=",fixed:$limit"; done
  for controller in "${CONTROLLERS[@]}"; do setups+=",$controller:100"; done
  turns=$(( (${#LIMITS[@]} + 1 + ${#CONTROLLERS[@]}) * CYCLES ))
  for subjects in "${SUBJECTS[@]}"; do
    for choice in "${CHOICES[@]}"; do
      start_broker off 0
      echo "== interleaved subjects=$subjects $choice: $setups" >&2
      # A cell whose run fails (its admin calls failed three times) is
      # left out of the report rather than ending the whole evaluation.
      taskset -c 1 "$LOADGEN" flow --bootstrap 127.0.0.1:29092 --admin 127.0.0.1:29093 \
        --subjects "$subjects" --choice "$choice" --secs "$((turns * SLICE))" \
        --publishers "$PUBLISHERS" --in-flight "$IN_FLIGHT" --acks "$ACKS" \
        --interleave "$setups" --slice-secs "$SLICE" \
        --label scenario=interleaved --label controller=interleaved --label start_limit=0 \
        --out "$POINTS" || echo "cell $subjects $choice failed: left out (broker log: $OUT/broker.log)" >&2
      stop_broker
    done
  done
  "$PY" scripts/bench_flow_report.py --interleaved "$POINTS" "$REPORT_DIR" "$SKIP"
  echo "report in $REPORT_DIR/flow-interleaved.md" >&2
  exit 0
fi

# Phase 1: the sweep (STEPS_ONLY: only 16 subjects uniform's fixed
# limits, which pick the steps' reference).
if [ -n "${STEPS_ONLY:-}" ]; then
  sweep=(--label scenario=sweep --label repeat=1)
  for limit in "${LIMITS[@]}"; do
    run fixed "$limit" 16 uniform "$SECS" "$PUBLISHERS" "$IN_FLIGHT" "${sweep[@]}"
  done
fi
for subjects in "${SUBJECTS[@]}"; do
  [ -n "${STEPS_ONLY:-}" ] && break
  for choice in "${CHOICES[@]}"; do
    sweep=(--label scenario=sweep --label repeat=1)
    run off 0 "$subjects" "$choice" "$SECS" "$PUBLISHERS" "$IN_FLIGHT" "${sweep[@]}"
    for limit in "${LIMITS[@]}"; do
      run fixed "$limit" "$subjects" "$choice" "$SECS" "$PUBLISHERS" "$IN_FLIGHT" "${sweep[@]}"
    done
  done
done

# Phase 2: the comparison (not with STEPS_ONLY). A setup is "controller:start limit".
for subjects in "${SUBJECTS[@]}"; do
  [ -n "${STEPS_ONLY:-}" ] && break
  for choice in "${CHOICES[@]}"; do
    # Not in the loop's word list: set -e does not see a substitution fail there.
    top=$("$PY" scripts/bench_flow_report.py --top-fixed "$POINTS" "$subjects" "$choice" 2)
    read -ra fixed <<<"$top"
    [ "${#fixed[@]}" -ge 1 ] || { echo "no fixed limit swept for $subjects $choice" >&2; exit 1; }
    setups=()
    for limit in "${fixed[@]}"; do setups+=("fixed:$limit"); done
    setups+=(off:0)
    for controller in "${CONTROLLERS[@]}"; do setups+=("$controller:100"); done
    n=${#setups[@]}
    # A Williams square's first row (0, 1, n-1, 2, n-2, ...); round r adds r.
    williams=(0)
    for j in $(seq 1 $((n - 1))); do
      if [ $((j % 2)) -eq 1 ]; then williams+=($(((j + 1) / 2))); else williams+=($((n - j / 2))); fi
    done
    for round in $(seq "$ROUNDS"); do
      for i in $(seq 0 $((n - 1))); do
        setup=${setups[$(((williams[i] + round - 1) % n))]}
        run "${setup%%:*}" "${setup##*:}" "$subjects" "$choice" "$SECS" "$PUBLISHERS" "$IN_FLIGHT" \
          --label scenario=cell --label "repeat=$round"
      done
    done
  done
done

# The steps, on the reference fixed limit of 16 subjects uniform.
BEST=$("$PY" scripts/bench_flow_report.py --best-fixed "$POINTS" 16 uniform)
HALF=$(python3 -c "print($STEP_SECS / 2)")
for round in $(seq "$STEP_ROUNDS"); do
  for controller in "${CONTROLLERS[@]}" fixed; do
    limit=100; [ "$controller" = fixed ] && limit="$BEST"
    run "$controller" "$limit" 16 uniform "$STEP_SECS" "$STEP_PUBLISHERS" "$STEP_IN_FLIGHT" \
      --demand-step-at "$HALF" --label scenario=demand-step --label "repeat=$round"
    if [ -z "$QUICK" ]; then
      in_cgroup=""; [ "$CAPACITY" = quota ] && in_cgroup=1
      IN_CGROUP=$in_cgroup run "$controller" "$limit" 16 uniform "$STEP_SECS" "$PUBLISHERS" "$IN_FLIGHT" \
        "$CAPACITY_AT" "$HALF" "${CAPACITY_STEP[@]}" --label scenario=capacity-step --label "repeat=$round"
    fi
  done
done

STEM="flow-$REGIME"; [ -n "${STEPS_ONLY:-}" ] && STEM="flow-$REGIME-steps"
"$PY" scripts/bench_flow_report.py "$POINTS" "$REPORT_DIR" "$HALF" "$REGIME" "$STEM"

echo "report in $REPORT_DIR/$STEM.md" >&2
