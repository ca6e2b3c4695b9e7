#!/usr/bin/env bash
# Run squall's tests (unit + integration) against a real Kafka broker.
#
#   scripts/test.sh [pytest args...]      e.g. scripts/test.sh tests/unit -k robots
#
# Broker, in order of preference:
#   1. $KAFKA_BOOTSTRAP_SERVERS if set (your own broker; left alone);
#   2. a Docker engine answers (`docker info`): testcontainers starts one
#      (SQUALL_TEST_DOCKER=1, see tests/conftest.py);
#   3. else the local Maven-jar broker (squall.tools.kafka_local) on the test port
#      ${SQUALL_TEST_BOOTSTRAP:-127.0.0.1:19092} (a broker on 9092 is never
#      touched), started empty and always stopped and wiped on exit if this
#      script started it.
# Chromium for the render tests: scripts/install-browser.sh (apt-get as root).
# Exit status: pytest's; "no tests collected" (pytest exit 5) is a failure too.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=.venv/bin/python
if [ ! -x "$PY" ]; then
    echo "test: $PY not found; run 'make venv' first" >&2
    exit 2
fi

# The render tests need a system Chromium (installed here when running as root, e.g. by .ci/run).
scripts/install-browser.sh || echo "test: could not install chromium; the render tests will fail" >&2

started=""
cleanup() {
    if [ -n "$started" ]; then
        echo "test: stopping the test broker at $started"
        "$PY" -m squall.cli.kafka down --bootstrap "$started" --wipe || true
    fi
}
trap cleanup EXIT

if [ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
    echo "test: using the broker at KAFKA_BOOTSTRAP_SERVERS=$KAFKA_BOOTSTRAP_SERVERS"
elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    echo "test: a Docker engine answers; testcontainers will start Kafka"
    export SQUALL_TEST_DOCKER=1
else
    bootstrap="${SQUALL_TEST_BOOTSTRAP:-127.0.0.1:19092}"
    # `python -m squall.cli.kafka` is `squall kafka` without importing the
    # other commands, so a broken command module cannot stop the test run.
    out="$("$PY" -m squall.cli.kafka up --bootstrap "$bootstrap" --fresh)"
    echo "$out"
    case "$out" in
        *"started broker"*) started="$bootstrap" ;;
    esac
    export KAFKA_BOOTSTRAP_SERVERS="$bootstrap"
fi

set +e
# Without arguments every test runs, the fault suite's CI profile included (tests/faults, a few minutes;
# SQUALL_FAULTS_PROFILE=long for the long one).
"$PY" -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "test: FAILED: pytest collected no tests" >&2
fi
exit "$rc"
