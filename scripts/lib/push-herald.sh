# Sourced by the push benchmarks: builds herald and the load generator,
# picks free loopback ports and starts one herald on $DATA (tmpfs) for
# push, with its PID in HERALD_PID; stop_herald stops it by that PID and
# removes $DATA. Needs ROOT, DATA and OUT set.
cargo build --release -p herald -p herald-loadgen
HERALD="$ROOT/target/release/herald"
LOADGEN="$ROOT/target/release/herald-loadgen"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
KAFKA="127.0.0.1:$(free_port)"
PUSH="127.0.0.1:$(free_port)"
ADMIN="127.0.0.1:$(free_port)"
HERALD_PID=""

stop_herald() {
  if [ -n "$HERALD_PID" ] && kill -0 "$HERALD_PID" 2>/dev/null; then
    kill "$HERALD_PID"
    wait "$HERALD_PID" 2>/dev/null || true
  fi
  rm -rf "$DATA"
}

start_herald() {
  rm -rf "$DATA"
  # Few Kafka connections are needed; the rest of the open-file limit goes
  # to push sessions.
  "$HERALD" serve --data-dir "$DATA" --kafka-listen "$KAFKA" --push-listen "$PUSH" \
    --admin-listen "$ADMIN" --max-connections 64 --log-level warn > "$OUT/herald.log" 2>&1 &
  HERALD_PID=$!
  for _ in $(seq 1 50); do
    (exec 3<>"/dev/tcp/${PUSH%:*}/${PUSH#*:}") 2>/dev/null && break
    sleep 0.2
  done
}
