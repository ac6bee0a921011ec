# Sourced by setup.sh / start.sh / stop.sh and the fan-out benchmark: one
# Mosquitto (Debian's package) on its own port and directories.
MDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MOSQUITTO_BIN="${MOSQUITTO_BIN:-/usr/sbin/mosquitto}"
MOSQUITTO_RUN="${MOSQUITTO_RUN:-/tmp/herald-bench-mosquitto}" # pid file, config, logs
MOSQUITTO_ADDR="127.0.0.1:19883"
