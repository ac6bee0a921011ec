#!/usr/bin/env bash
# Runs the security tests (tests/compat/test_security.py) against Apache
# Kafka 4.3.1 configured as herald is there (SASL_PLAINTEXT, SASL_SSL and
# SSL listeners with client certificates, StandardAuthorizer, SCRAM users,
# the same principal mapping rules), to show that the tests' expectations,
# and so herald's answers, are Kafka's. What differs by design is skipped
# there and says why (pytest -rs lists it).
#
#   scripts/security-vs-kafka.sh [pytest arguments...]
#
# Needs what scripts/install-test-deps.sh installs (it is run first).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
./scripts/install-test-deps.sh
HERALD_COMPAT_KAFKA_LIB="$ROOT/bench/kafka/lib" \
  .venv/bin/pytest -q -rs tests/compat/test_security.py "$@"
