# Sourced by start.sh / stop.sh and scripts/bench-wire.sh (copied from shared/peers/kafka,
# on its own ports and directories so that it never meets a peer Kafka).
KDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KAFKA_DATA="${KAFKA_DATA:-/dev/shm/herald-bench-kafka}"
KAFKA_RUN="${KAFKA_RUN:-/tmp/herald-bench-kafka}"      # pid file + logs
BOOTSTRAP="127.0.0.1:19392"
CP="$KDIR/lib/*"
TOOLS_JAVA_OPTS="-Xmx512m -XX:+UseG1GC -Dlog4j2.configurationFile=$KDIR/config/tools-log4j2.properties"
# Run a Kafka tool class:  ktool org.apache.kafka.tools.TopicCommand --bootstrap-server ... 
ktool() { java $TOOLS_JAVA_OPTS -cp "$CP" "$@"; }
