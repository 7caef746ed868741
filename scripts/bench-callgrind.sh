#!/usr/bin/env bash
# kvod's instructions per set for each set shape (issue 13), counted by callgrind: repeatable on a busy
# machine, unlike sets/s. Installs valgrind (Debian package) if it is missing, builds kvod and kvod-bench
# in release mode and runs `kvod-bench callgrind` (arguments pass through), e.g.
#
#   scripts/bench-callgrind.sh                                  # every shape, 1 subscriber, 20,480 sets
#   scripts/bench-callgrind.sh --shapes object3-id --subscribers 10
#   scripts/bench-callgrind.sh --shapes object3-id --keep /tmp/cg   # then: callgrind_annotate /tmp/cg/callgrind.out.*
#   scripts/bench-callgrind.sh --shapes string-id,object3-id --users-globs 100   # open mode vs a user with 100 glob rules
#
# Each shape takes two kvod runs under valgrind (about 30 s each on the CI machine class).
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

if ! command -v valgrind >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || kvod_fail "valgrind is missing and apt-get is not available: install valgrind"
    kvod_log "installing valgrind with apt-get"
    kvod_as_root apt-get update >&2
    kvod_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends valgrind >&2
fi

kvod_log "swift build -c release (kvod, kvod-bench; kvod_release_build)"
kvod_release_build --product kvod
kvod_release_build --product kvod-bench
exec "$kvod_release_scratch/release/kvod-bench" callgrind "$@"
