#!/usr/bin/env bash
# Starts Mosquitto on $MOSQUITTO_ADDR, anonymous, no persistence, limits
# raised for fan-out (no cap on connections or queued messages per client
# beyond memory). Prints the PID; waits for the port.
set -euo pipefail
source "$(dirname "$0")/env.sh"
"$MDIR/setup.sh" >/dev/null
mkdir -p "$MOSQUITTO_RUN"
if [ -f "$MOSQUITTO_RUN/mosquitto.pid" ] && kill -0 "$(cat "$MOSQUITTO_RUN/mosquitto.pid")" 2>/dev/null; then
  echo "already running, pid $(cat "$MOSQUITTO_RUN/mosquitto.pid")"; exit 0
fi
host="${MOSQUITTO_ADDR%:*}"; port="${MOSQUITTO_ADDR#*:}"
cat > "$MOSQUITTO_RUN/mosquitto.conf" <<CONF
listener $port $host
allow_anonymous true
persistence false
max_connections -1
max_queued_messages 100000
max_inflight_messages 1000
# Latency is measured: no Nagle delay on the broker's sockets either.
set_tcp_nodelay true
log_dest stdout
log_type error
log_type warning
CONF
ulimit -n "$(ulimit -Hn)"
nohup "$MOSQUITTO_BIN" -c "$MOSQUITTO_RUN/mosquitto.conf" > "$MOSQUITTO_RUN/stdout.log" 2>&1 &
echo $! > "$MOSQUITTO_RUN/mosquitto.pid"
for _ in $(seq 1 50); do
  if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
    echo "mosquitto up on $MOSQUITTO_ADDR pid $(cat "$MOSQUITTO_RUN/mosquitto.pid") (logs: $MOSQUITTO_RUN)"; exit 0
  fi
  kill -0 "$(cat "$MOSQUITTO_RUN/mosquitto.pid")" 2>/dev/null || { echo "mosquitto died:"; tail -20 "$MOSQUITTO_RUN/stdout.log"; exit 1; }
  sleep 0.2
done
echo "mosquitto did not open $MOSQUITTO_ADDR within 10 s"; exit 1
