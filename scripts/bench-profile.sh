#!/usr/bin/env bash
# Profiles kvod under the issue-5 throughput load (100 subscribers, 64-byte values, pipelined sets):
# `perf record -g` attached to the kvod process for the timed part of the run, then the hottest symbols
# (self time, demangled) and the hottest call chains. Installs perf (Debian: linux-perf) if missing.
#
#   scripts/bench-profile.sh                               # S=100 B=64, 10 s
#   scripts/bench-profile.sh --subscribers 10 --bytes 1024 --seconds 5
#
# Writes bench-results/profile-<UTC time>.perf.data, .symbols.txt (flat) and .callers.txt (call graph).
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

if ! command -v perf >/dev/null 2>&1; then
    kvod_log "installing linux-perf with apt-get"
    kvod_as_root apt-get update >&2
    kvod_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends linux-perf >&2
fi

mkdir -p bench-results
base=bench-results/profile-$(date -u +%Y%m%dT%H%M%SZ)
KVOD_BENCH_OUT=$base.md scripts/bench.sh throughput --server kvod --subscribers 100 --bytes 64 --seconds 10 \
    "$@" --perf "$base.perf.data"

# Demangled Swift names, without perf's trailing padding.
demangle() {
    if command -v swift-demangle >/dev/null 2>&1; then swift-demangle --simplified; else swift demangle --simplified; fi |
        sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//; s/[[:space:]]+$//'
}
perf report -i "$base.perf.data" --no-children --sort dso,symbol -g none --percent-limit 0.5 --stdio 2>/dev/null \
    | demangle > "$base.symbols.txt"
perf report -i "$base.perf.data" --children --sort symbol -g caller,0.5,callee --percent-limit 5 --stdio 2>/dev/null \
    | demangle > "$base.callers.txt"
kvod_log "top symbols (self time), from $base.symbols.txt; call chains in $base.callers.txt"
grep -E '^ +[0-9]' "$base.symbols.txt" | head -30
