#!/usr/bin/env bash
# Sets up what is missing (see scripts/setup.sh), builds everything (the integration tests run the
# built kvod and kvoclient) and runs all tests: the Swift tests, then the web tests (scripts/test-web.sh:
# HTTP, WebSocket and metrics with Python's websockets and prometheus_client). The cluster's tests run
# nats-server 2.15 from .venv (scripts/setup-python.sh). Arguments go to
# `swift test`, e.g. `scripts/test.sh --filter CLITests` (which skips the web tests).
#
# Without arguments, after one build, three test processes run at once: the serial cluster suite
# (IntegrationTests.ClusterTests, the longest chain), the other Swift tests, and the web tests. A Swift test
# process runs at most as many tests at a time as the machine has cores (Swift's cooperative thread pool), and
# most integration tests wait on a kvod process or a socket rather than compute, so one process left the cores
# idle a fifth of the time and ran the cluster suite after everything else (docs/design.md, "CI"). Each
# process's lines are prefixed with its name ([tests], [cluster], [web]).
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# .venv: the web tests' tooling and nats-server 2.15 (KVOD_NATS_SERVER, which the cluster's tests run).
# shellcheck source=scripts/setup-python.sh
source scripts/setup-python.sh

if [ "$#" -gt 0 ]; then
    step_started=$SECONDS
    kvod_log "swift build"
    swift build
    kvod_log "swift build: $((SECONDS - step_started)) s"
    step_started=$SECONDS
    kvod_log "swift test $*"
    swift test "$@"
    kvod_log "swift test: $((SECONDS - step_started)) s"
    exit 0
fi

step_started=$SECONDS
kvod_log "swift build --build-tests"
swift build --build-tests
kvod_log "swift build --build-tests: $((SECONDS - step_started)) s"

cluster_suite='IntegrationTests\.ClusterTests'
# Runs "$@" with its output prefixed by [NAME] and its time logged; returns its status.
shard() {
    local name=$1 started=$SECONDS status=0
    shift
    kvod_log "[$name] $*"
    "$@" 2>&1 | sed -u "s/^/[$name] /" || status=$?  # pipefail: the command's status
    kvod_log "[$name] $([ "$status" -eq 0 ] && echo passed || echo "FAILED ($status)") in $((SECONDS - started)) s"
    return "$status"
}
# The build is done: the test processes need not take SwiftPM's lock on .build, which would serialise them.
shard cluster swift test --skip-build --ignore-lock --filter "$cluster_suite" &
cluster=$!
shard web scripts/test-web.sh &
web=$!
tests_status=0
shard tests swift test --skip-build --ignore-lock --skip "$cluster_suite" || tests_status=$?
cluster_status=0
wait "$cluster" || cluster_status=$?
web_status=0
wait "$web" || web_status=$?
kvod_log "swift tests and web tests: $((SECONDS - step_started)) s"
failed=()
[ "$tests_status" -eq 0 ] || failed+=(tests)
[ "$cluster_status" -eq 0 ] || failed+=(cluster)
[ "$web_status" -eq 0 ] || failed+=(web)
[ "${#failed[@]}" -eq 0 ] || kvod_fail "failed: ${failed[*]} (their lines are prefixed with the name)"
