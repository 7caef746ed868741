#!/usr/bin/env bash
# Sets up what is missing (see scripts/setup.sh), builds everything (the integration tests run the
# built kvod and kvoclient) and runs all tests: the Swift tests, then the web tests (scripts/test-web.sh:
# HTTP, WebSocket and metrics with Python's websockets and prometheus_client). The cluster's tests run
# nats-server 2.15 from .venv (scripts/setup-python.sh). Arguments go to
# `swift test`, e.g. `scripts/test.sh --filter CLITests` (which skips the web tests).
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# .venv: the web tests' tooling and nats-server 2.15 (KVOD_NATS_SERVER, which the cluster's tests run).
# shellcheck source=scripts/setup-python.sh
source scripts/setup-python.sh

step_started=$SECONDS
kvod_log "swift build"
swift build
kvod_log "swift build: $((SECONDS - step_started)) s"
step_started=$SECONDS
kvod_log "swift test $*"
swift test "$@"
kvod_log "swift test: $((SECONDS - step_started)) s"
if [ "$#" -eq 0 ]; then
    step_started=$SECONDS
    scripts/test-web.sh
    kvod_log "web tests: $((SECONDS - step_started)) s"
fi
