#!/usr/bin/env bash
# Builds nats-server $NATS_VERSION from the Go module proxy into bench/nats/bin
# (ignored by git). Idempotent: does nothing when that version is there.
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ -x "$NATS_BIN" ] && "$NATS_BIN" --version 2>/dev/null | grep -q "${NATS_VERSION#v}"; then
  exit 0
fi
command -v go >/dev/null || { echo "go is needed to build nats-server" >&2; exit 1; }
mkdir -p "$NDIR/bin"
GOBIN="$NDIR/bin" GOFLAGS=-mod=mod go install "github.com/nats-io/nats-server/v2@$NATS_VERSION"
"$NATS_BIN" --version
