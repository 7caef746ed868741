#!/usr/bin/env bash
# Sets up what is missing (see scripts/setup.sh), builds everything (the integration tests run the
# built kvod and kvoclient) and runs all tests. Arguments go to `swift test`, e.g.
# `scripts/test.sh --filter CLITests`.
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

kvod_log "swift build"
swift build
kvod_log "swift test $*"
swift test "$@"
