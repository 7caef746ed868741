#!/usr/bin/env bash
# Sets up what is missing (see scripts/setup.sh), builds everything (the integration tests run the
# built kvod and kvoclient) and runs all tests: the Swift tests, then the web tests (scripts/test-web.sh:
# HTTP, WebSocket and metrics with Python's websockets and prometheus_client). The cluster's tests run
# nats-server 2.15 from .venv (scripts/setup-python.sh). Arguments go to
# `swift test`, e.g. `scripts/test.sh --filter CLITests` (which skips the web tests).
#
# Without arguments, it builds the tests (debug) and, beside them, the release kvod and kvoclient
# (kvod_release_build: the binaries users run, in $kvod_release_scratch); then three test processes run at once:
# the serial cluster suite (IntegrationTests.ClusterTests, the longest chain), the other Swift tests, and the web
# tests. The tests that start kvod or kvoclient as a process start the release ones (KVOD_TEST_BINARIES, KVOD_BIN):
# what users run is what is tested, and it took the three processes about 40 % less CPU than the debug kvod
# (docs/design.md, "CI"). The in-process server tests (KVOServerTests) and the ThreadSanitizer run keep the debug
# build's checks. A Swift test process runs at most as many tests at a time as the machine has cores (Swift's
# cooperative thread pool), and most integration tests wait on a kvod process or a socket rather than compute, so
# one process left the cores idle a fifth of the time and ran the cluster suite after everything else. Each
# process's lines are prefixed with its name ([tests], [cluster], [web]). With arguments, every build and test is
# the debug one (`swift test`'s own).
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
# Two build folders (SwiftPM locks one for a whole build), so the two builds share the cores.
kvod_log "swift build --build-tests, and beside it the release kvod and kvoclient ($kvod_release_scratch)"
( kvod_release_build --product kvod && kvod_release_build --product kvoclient ) &
release_build=$!
debug_status=0
swift build --build-tests || debug_status=$?
release_status=0
wait "$release_build" || release_status=$?
[ "$debug_status" -eq 0 ] || kvod_fail "swift build --build-tests failed ($debug_status)"
[ "$release_status" -eq 0 ] || kvod_fail "the release build of kvod and kvoclient failed ($release_status)"
kvod_log "builds: $((SECONDS - step_started)) s"

# The executables the tests start: the debug build's (the examples, kvod-bench), with kvod and kvoclient
# replaced by the release ones.
debug_products=$(swift build --show-bin-path)
release_products=$(kvod_release_build --show-bin-path 2>&1 | tail -n 1)
test_binaries=.build/test-binaries
rm -rf "$test_binaries"
mkdir -p "$test_binaries"
for product in "$debug_products"/*; do
    [ -f "$product" ] && [ -x "$product" ] && ln -s "$product" "$test_binaries/"
done
for product in kvod kvoclient; do
    [ -x "$release_products/$product" ] || kvod_fail "$release_products/$product is missing after the release build"
    ln -sf "$release_products/$product" "$test_binaries/$product"
done
export KVOD_TEST_BINARIES=$PWD/$test_binaries KVOD_BIN=$PWD/$test_binaries/kvod
kvod_log "the tests start kvod and kvoclient from $release_products"
step_started=$SECONDS

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
# The build is done: the test processes need not take SwiftPM's lock on .build, which would serialise them. But two
# `swift test` starting at the same instant both open the build database, and one can fail ("unable to attach DB:
# database is locked", seen once in CI on a loaded machine): the second starts once the first has started the test
# program (it is done with the database then). Its process is looked for, not its output, which a pipe buffers: a
# wait for the line "Test run started" held the second back for about 100 s of the cluster's tests.
test_program="$debug_products/kvodPackageTests.xctest"
shard cluster swift test --skip-build --ignore-lock --filter "$cluster_suite" &
cluster=$!
shard web scripts/test-web.sh &
web=$!
deadline=$((SECONDS + 120))
until pgrep -f "^$test_program" >/dev/null || ! kill -0 "$cluster" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; do
    sleep 0.2
done
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
