#!/usr/bin/env bash
# Sets up what is missing (see scripts/setup.sh), builds kvod and kvoclient in release mode and runs
# kvod in the foreground. Arguments go to kvod, e.g. `scripts/run.sh --port 7421 --log-level debug`.
# Stop it with Ctrl-C.
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

kvod_log "swift build -c release (kvod_release_build)"
kvod_release_build
kvod_log "starting kvod (kvoclient is at $kvod_release_scratch/release/kvoclient)"
exec "$kvod_release_scratch/release/kvod" "$@"
