#!/usr/bin/env bash
# Start a single-node KRaft Kafka (broker+controller) on 127.0.0.1:19392, data in tmpfs (the wire benchmark's copy of shared/peers/kafka/start.sh).
# Formats storage on first run (or after stop.sh --wipe). Prints the PID; waits until the port answers.
set -euo pipefail
source "$(dirname "$0")/env.sh"
ls "$KDIR"/lib/kafka_2.13-*.jar >/dev/null 2>&1 || "$KDIR/setup.sh"
mkdir -p "$KAFKA_RUN"
if [ -f "$KAFKA_RUN/kafka.pid" ] && kill -0 "$(cat "$KAFKA_RUN/kafka.pid")" 2>/dev/null; then
  echo "already running, pid $(cat "$KAFKA_RUN/kafka.pid")"; exit 0
fi
# rewrite log.dirs if KAFKA_DATA overridden
sed "s#^log.dirs=.*#log.dirs=$KAFKA_DATA#" "$KDIR/config/server.properties" > "$KAFKA_RUN/server.properties"
# KAFKA_EXTRA_PROPERTIES: a file of key=value lines that replace or add to
# the config (scripts/bench-security.sh adds an SSL listener).
if [ -n "${KAFKA_EXTRA_PROPERTIES:-}" ]; then
  keys=$(grep -oE '^[^#=]+' "$KAFKA_EXTRA_PROPERTIES" | sed 's/[.[\*^$]/\\&/g' | paste -sd'|')
  grep -vE "^($keys)=" "$KAFKA_RUN/server.properties" > "$KAFKA_RUN/server.properties.new" || true
  cat "$KAFKA_EXTRA_PROPERTIES" >> "$KAFKA_RUN/server.properties.new"
  mv "$KAFKA_RUN/server.properties.new" "$KAFKA_RUN/server.properties"
fi
if [ ! -f "$KAFKA_DATA/meta.properties" ]; then
  mkdir -p "$KAFKA_DATA"
  CLUSTER_ID="$(java -cp "$CP" -Dlog4j2.configurationFile="$KDIR/config/tools-log4j2.properties" kafka.tools.StorageTool random-uuid)"
  java -cp "$CP" -Dlog4j2.configurationFile="$KDIR/config/tools-log4j2.properties" \
       kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$KAFKA_RUN/server.properties"
fi
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms1G -Xmx1G}"
KAFKA_JVM_PERFORMANCE_OPTS="${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}"
nohup java $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS \
  -Dkafka.logs.dir="$KAFKA_RUN" -Dlog4j2.configurationFile="$KDIR/config/log4j2.properties" \
  -cp "$CP" kafka.Kafka "$KAFKA_RUN/server.properties" > "$KAFKA_RUN/stdout.log" 2>&1 &
echo $! > "$KAFKA_RUN/kafka.pid"
for i in $(seq 1 60); do
  if (exec 3<>/dev/tcp/127.0.0.1/19392) 2>/dev/null; then
    echo "kafka up on 127.0.0.1:19392 pid $(cat "$KAFKA_RUN/kafka.pid") after ~${i}s (logs: $KAFKA_RUN)"; exit 0
  fi
  kill -0 "$(cat "$KAFKA_RUN/kafka.pid")" 2>/dev/null || { echo "kafka died:"; tail -30 "$KAFKA_RUN/stdout.log" "$KAFKA_RUN/server.log" 2>/dev/null; exit 1; }
  sleep 1
done
echo "kafka did not open 19392 within 60s"; exit 1
