#!/usr/bin/env bash
# Installs Debian's mosquitto package when it is missing (the broker only;
# the benchmark's MQTT clients are the load generator's).
set -euo pipefail
source "$(dirname "$0")/env.sh"
[ -x "$MOSQUITTO_BIN" ] && exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get install -y --no-install-recommends mosquitto >/dev/null
[ -x "$MOSQUITTO_BIN" ] || { echo "installing mosquitto did not give $MOSQUITTO_BIN" >&2; exit 1; }
