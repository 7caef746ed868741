#!/usr/bin/env bash
# The Swift client library's tests under ThreadSanitizer (issue 12: "the client's tests pass under
# `swift test --sanitize=thread`"). A separate build folder (.build-tsan: every target, kvod included,
# built with TSan, so the kvod these tests start runs under it too) and halt_on_error, so that a race
# reported in the test process or in a kvod it started fails the run. The filter adds the server's own
# thread hand-over at start-up (ObjectTableFillerTests: load() inserting on a second thread). Arguments
# replace the filter (they can only narrow it: the build holds just those tests).
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

# KVOD_TEST_SCOPE=tsan: Package.swift then gives the test targets only these tests' files (the client
# library's test target, KVOClientTests, and ObjectTableFillerTests of KVOServerTests; no IntegrationTests), so
# this build compiles those and not the other test files; the filter says the same for a build made without it.
export KVOD_TEST_SCOPE=tsan
filter=("--filter" "KVOClientTests|ObjectTableFiller")
if [ "$#" -gt 0 ]; then filter=("$@"); fi
# Line tables only (-gline-tables-only): a race report still names each frame's file and line, and the build,
# which CI makes beside its tests, has less to write. Its own folder, so no other build's flags change.
kvod_log "swift build --build-tests --sanitize=thread -gline-tables-only (.build-tsan)"
swift build --build-tests --sanitize=thread -Xswiftc -gline-tables-only --scratch-path .build-tsan
# KVOD_TSAN_STEP=build: the build only (.ci/run makes it beside its tests stage, then runs this script again).
[ "${KVOD_TSAN_STEP:-}" = build ] && exit 0
kvod_log "swift test --sanitize=thread ${filter[*]}"
TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}" \
    swift test --skip-build --sanitize=thread -Xswiftc -gline-tables-only --scratch-path .build-tsan "${filter[@]}"
