#!/usr/bin/env bash
# Installs everything the tests need, idempotently (a second run only checks):
#   - .venv with the pinned Python packages of tests/compat/requirements.txt;
#   - kcat, from Debian;
#   - the openssl command-line tool, from Debian (the security tests make
#     their certificates with it);
#   - Apache Kafka's jars (bench/kafka/setup.sh, Maven), whose command-line
#     tools (kafka-acls, kafka-configs) the security tests drive;
#   - the Java Kafka client (tests/compat/java/pom.xml) fetched by Maven into
#     tests/compat/.deps/java/lib, and tests/compat/java/HeraldCompat.java compiled;
#   - Debian's chromium, the browser the push suite drives with Playwright;
#   - cargo-fuzz, when the repository has a fuzz target (fuzz/ or scripts/fuzz.sh).
# Works as root on Debian 12 with no standard input (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
export DEBIAN_FRONTEND=noninteractive

say() { echo "[install-test-deps] $*"; }

APT_UPDATED=0
apt_install() {
  if [ "$APT_UPDATED" = 0 ]; then
    apt-get update -qq
    APT_UPDATED=1
  fi
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Stamp files record the checksum of the inputs an install step used, so the
# step reruns when (and only when) those inputs change.
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

python_env() {
  local venv="$ROOT/.venv" req="$ROOT/tests/compat/requirements.txt"
  local want
  want="$(sha256sum "$req" | cut -d' ' -f1)"
  if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv"
    python3 -m venv "$venv"
  fi
  if ! stamp_ok "$venv/.requirements.sha256" "$want"; then
    say "installing $(grep -c '==' "$req") pinned Python packages"
    "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$req"
    echo "$want" >"$venv/.requirements.sha256"
  fi
}

kcat_tool() {
  if ! command -v kcat >/dev/null; then
    say "installing kcat from Debian"
    apt_install kcat
  fi
}

openssl_tool() {
  if ! command -v openssl >/dev/null; then
    say "installing openssl from Debian"
    apt_install openssl
  fi
}

kafka_tools() {
  # Idempotent: the script only checks when the jars are there.
  "$ROOT/bench/kafka/setup.sh" >/dev/null
}

java_client() {
  command -v javac >/dev/null || { say "installing a JDK"; apt_install openjdk-17-jdk-headless; }
  command -v mvn >/dev/null || { say "installing Maven"; apt_install maven; }
  local src="$ROOT/tests/compat/java" deps="$ROOT/tests/compat/.deps/java"
  local pom_sum src_sum
  pom_sum="$(sha256sum "$src/pom.xml" | cut -d' ' -f1)"
  if ! stamp_ok "$deps/lib/.pom.sha256" "$pom_sum"; then
    say "fetching the Java Kafka client with Maven"
    rm -rf "$deps/lib"
    mkdir -p "$deps"
    if ! mvn -B -Dstyle.color=never -f "$src/pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$deps/lib" -DincludeScope=runtime >"$deps/maven.log" 2>&1; then
      tail -40 "$deps/maven.log"
      exit 1
    fi
    echo "$pom_sum" >"$deps/lib/.pom.sha256"
  fi
  src_sum="$(cat "$src"/*.java "$deps/lib/.pom.sha256" | sha256sum | cut -d' ' -f1)"
  if ! stamp_ok "$deps/classes/.src.sha256" "$src_sum"; then
    say "compiling tests/compat/java"
    rm -rf "$deps/classes"
    mkdir -p "$deps/classes"
    javac -Xlint:all -Werror -d "$deps/classes" -cp "$deps/lib/*" "$src"/*.java
    echo "$src_sum" >"$deps/classes/.src.sha256"
  fi
}

chromium_browser() {
  if ! command -v chromium >/dev/null; then
    say "installing chromium from Debian (for the push suite's browser tests)"
    apt_install chromium
  fi
}

fuzz_tool() {
  if [ ! -d "$ROOT/fuzz" ] && [ ! -x "$ROOT/scripts/fuzz.sh" ]; then
    return
  fi
  if ! rustup toolchain list | grep -q '^nightly'; then
    say "cargo-fuzz needs the nightly Rust toolchain, which is not installed"
    exit 1
  fi
  if ! cargo fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz (cargo install --locked)"
    cargo install cargo-fuzz --locked --quiet
  fi
}

python_env
kcat_tool
openssl_tool
java_client
kafka_tools
chromium_browser
fuzz_tool
say "ready"
