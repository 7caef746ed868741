#!/usr/bin/env bash
# Sets up what is missing (see scripts/setup.sh), builds kvod and kvoclient in release mode and runs
# kvod in the foreground. Arguments go to kvod, e.g. `scripts/run.sh --port 7421 --log-level debug`.
# Stop it with Ctrl-C.
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

kvod_log "swift build -c release"
swift build -c release >&2
kvod_log "starting kvod (kvoclient is at .build/release/kvoclient)"
exec .build/release/kvod "$@"
