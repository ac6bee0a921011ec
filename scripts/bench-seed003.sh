#!/usr/bin/env bash
# Seed 003's experiment on herald: delivery latency and time-outs as
# clients grow (2,000 upward) for one node, seed 003's relay tree (figure 4:
# M; R1 and R2 under M; R3 under R1) and a 4-node Raft cluster (topic with
# replication factor 4). Each client receives 20 messages a round, a round
# a second, and times out when it has not all of them within 1 s. See
# scripts/bench_seed003.py for what runs; docs/benchmarks.md ("Seed 003's
# experiment") for the figures.
#
#   scripts/bench-seed003.sh [--quick] [--clients 2000,4000,...]
#       [--topologies single,tree,raft] [--repeats N] [--rounds N]
#       [--max-minutes M] [--out DIR]
#
# The full run (the defaults: 2,000 to 64,000 clients, 20 rounds a run, 3
# repeats, each topology until it passes 50% time-outs or the open-file
# limit) takes about 30 minutes on a 2-core machine; --quick (2,000
# clients, 5 rounds, once) about 20 seconds, plus the build when the
# binaries are stale. Rows go to $OUT/seed003.jsonl (default
# /tmp/herald-bench-seed003), the table of medians to $OUT/seed003.md.
#
# Every herald node and load generator is started and stopped by the driver
# by PID, data in /dev/shm removed at the end. net.core.somaxconn is left
# as it is: each generator opens 200 connections at a time, far below the
# default accept queue of 4,096.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
# Other work shares this machine: build at idle priority. A no-op when
# the binaries are up to date.
chrt -i 0 cargo build --release -p herald -p herald-loadgen
# Every client is a connection on both sides: the load generator's
# processes and each node take as many files as the hard limit allows.
ulimit -n "$(ulimit -Hn)"
exec python3 scripts/bench_seed003.py "$@"
