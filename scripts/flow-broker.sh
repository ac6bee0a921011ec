# Sourced by scripts/bench-flow.sh and scripts/bench-flow-overload.sh: the
# binaries they run, and one herald at a time on core 0 with the flow
# control asked for.
#   needs: ROOT (the checkout); when starting, DATA (its data directory,
#   deleted when it stops), OUT (for broker.log), FLUSH (--flush mode)
#   start_broker CONTROLLER LIMIT   stops the running one first
#   stop_broker                     by its PID

# matplotlib is in the system Python.
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
LOADGEN="$ROOT/target/release/herald-loadgen"
HERALD="$ROOT/target/release/herald"

PID=""
stop_broker() {
  if [ -n "$PID" ]; then
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    PID=""
  fi
  rm -rf "$DATA"
}

start_broker() {
  stop_broker
  local args=(--flow-control "$1")
  [ "$1" != off ] && args+=(--flow-limit "$2")
  taskset -c 0 "$HERALD" serve --data-dir "$DATA" --kafka-listen 127.0.0.1:29092 \
    --admin-listen 127.0.0.1:29093 --push-listen 127.0.0.1:29094 --flush "$FLUSH" "${args[@]}" \
    >"$OUT/broker.log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/29092) 2>/dev/null && return 0
    sleep 0.1
  done
  echo "herald did not start" >&2; tail "$OUT/broker.log" >&2; exit 1
}
