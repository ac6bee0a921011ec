# Sourced by setup.sh / start.sh / stop.sh and the fan-out benchmark: one
# nats-server (core NATS, JetStream when asked) on its own port and
# directories, so it never meets another.
NDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NATS_VERSION="${NATS_VERSION:-v2.15.2}"
NATS_BIN="$NDIR/bin/nats-server"              # built by setup.sh, ignored by git
NATS_RUN="${NATS_RUN:-/tmp/herald-bench-nats}" # pid file, config, logs
NATS_DATA="${NATS_DATA:-/dev/shm/herald-bench-nats}" # JetStream storage
NATS_ADDR="127.0.0.1:19422"
