#!/usr/bin/env bash
# Stops the Mosquitto started by start.sh (by its PID).
set -uo pipefail
source "$(dirname "$0")/env.sh"
PIDF="$MOSQUITTO_RUN/mosquitto.pid"
if [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; then
  PID="$(cat "$PIDF")"; kill "$PID"
  for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$PID" 2>/dev/null && { echo "SIGKILL $PID"; kill -9 "$PID"; }
  echo "stopped mosquitto pid $PID"
else
  echo "mosquitto not running"
fi
rm -f "$PIDF"
exit 0
