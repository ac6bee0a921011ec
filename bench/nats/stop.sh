#!/usr/bin/env bash
# Stops the nats-server started by start.sh (by its PID). --wipe also
# deletes its JetStream storage.
set -uo pipefail
source "$(dirname "$0")/env.sh"
PIDF="$NATS_RUN/nats.pid"
if [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; then
  PID="$(cat "$PIDF")"; kill "$PID"
  for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$PID" 2>/dev/null && { echo "SIGKILL $PID"; kill -9 "$PID"; }
  echo "stopped nats-server pid $PID"
else
  echo "nats-server not running"
fi
rm -f "$PIDF"
[ "${1:-}" = "--wipe" ] && rm -rf "$NATS_DATA" && echo "wiped $NATS_DATA"
exit 0
