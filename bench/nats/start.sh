#!/usr/bin/env bash
# Starts nats-server on $NATS_ADDR (core NATS; --jetstream adds JetStream
# with its storage in tmpfs), with limits raised for fan-out: no cap on
# connections, pending bytes large enough that a slow subscriber is cut
# off only when it is really stalled. Prints the PID; waits for the port.
set -euo pipefail
source "$(dirname "$0")/env.sh"
"$NDIR/setup.sh" >/dev/null
mkdir -p "$NATS_RUN"
if [ -f "$NATS_RUN/nats.pid" ] && kill -0 "$(cat "$NATS_RUN/nats.pid")" 2>/dev/null; then
  echo "already running, pid $(cat "$NATS_RUN/nats.pid")"; exit 0
fi
{
  echo "listen: $NATS_ADDR"
  echo "max_connections: 1000000"
  echo "max_payload: 1MB"
  echo "max_pending: 64MB"
  echo "write_deadline: \"10s\""
  if [ "${1:-}" = "--jetstream" ]; then
    mkdir -p "$NATS_DATA"
    echo "jetstream { store_dir: \"$NATS_DATA\" }"
  fi
} > "$NATS_RUN/nats.conf"
ulimit -n "$(ulimit -Hn)"
nohup "$NATS_BIN" -c "$NATS_RUN/nats.conf" > "$NATS_RUN/nats.log" 2>&1 &
echo $! > "$NATS_RUN/nats.pid"
host="${NATS_ADDR%:*}"; port="${NATS_ADDR#*:}"
for _ in $(seq 1 50); do
  if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
    echo "nats-server up on $NATS_ADDR pid $(cat "$NATS_RUN/nats.pid") (logs: $NATS_RUN)"; exit 0
  fi
  kill -0 "$(cat "$NATS_RUN/nats.pid")" 2>/dev/null || { echo "nats-server died:"; tail -20 "$NATS_RUN/nats.log"; exit 1; }
  sleep 0.2
done
echo "nats-server did not open $NATS_ADDR within 10 s"; exit 1
