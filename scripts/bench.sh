#!/usr/bin/env bash
# Benchmarks kvod against Redis pub/sub (issue 5; see docs/performance.md). Sets up what is missing
# (scripts/setup.sh, plus redis-server from apt), builds kvod and kvod-bench in release mode, raises the
# descriptor limit, and runs one kvod-bench command; the default is the full run:
#
#   scripts/bench.sh                                    # all: matrix, latency, scale, spread, durable
#   scripts/bench.sh all --seconds 10                   # longer cells
#   scripts/bench.sh throughput --subscribers 100 --bytes 64 --server kvod
#   scripts/bench.sh selftest                           # the delivery checkers must catch planted faults
#
# kvod-bench starts and stops every kvod and redis-server itself, on free loopback ports. The markdown
# report is printed and written to bench-results/<UTC time>-<command>.md (ignored by git), or to
# $KVOD_BENCH_OUT. Take figures for docs/performance.md on a quiet machine (check `uptime`): the load
# generator and the server share its cores.
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

if ! command -v redis-server >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || kvod_fail "redis-server is missing and apt-get is not available: install Redis 7"
    kvod_log "installing redis-server with apt-get"
    kvod_as_root apt-get update >&2
    kvod_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server >&2
fi

# KVOD_BENCH_BUILT=1: the caller has just built them (scripts/bench-smoke.sh, which calls this three times; a
# build with nothing to do still takes SwiftPM about 7 s to plan). KVOD_BENCH_PROGRAM: the kvod-bench to run
# instead of the release one (CI's smoke runs the debug one its tests stage built: it checks no figure); the kvod
# it measures is always the release one.
bench_program=${KVOD_BENCH_PROGRAM:-$kvod_release_scratch/release/kvod-bench}
if [ "${KVOD_BENCH_BUILT:-0}" = 1 ]; then
    kvod_log "kvod as built in $kvod_release_scratch/release, $bench_program (KVOD_BENCH_BUILT=1)"
else
    kvod_log "swift build -c release (kvod$([ -n "${KVOD_BENCH_PROGRAM:-}" ] || echo ", kvod-bench"); kvod_release_build)"
    kvod_release_build --product kvod
    [ -n "${KVOD_BENCH_PROGRAM:-}" ] || kvod_release_build --product kvod-bench
fi

# 10,000 connections need more descriptors than the common default of 1024 (kvod-bench raises its own
# soft limit to the hard one as well; the servers it starts inherit it).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

command=${1:-all}
[ "$#" -gt 0 ] && shift
mkdir -p bench-results
out=${KVOD_BENCH_OUT:-bench-results/$(date -u +%Y%m%dT%H%M%SZ)-${command}.md}
export KVOD_BENCH_COMMAND="scripts/bench.sh ${command}${*:+ $*}"
revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- Sources Package.swift 2>/dev/null || revision+=" with uncommitted changes"
export KVOD_BENCH_REVISION=$revision
# Another kvod-bench (KVOD_BENCH_PROGRAM) would start the kvod beside it (the debug one, for CI's): the network
# commands are told the release one's path (a later --kvod among the arguments still wins).
kvod_choice=()
release_kvod=$kvod_release_scratch/release/kvod
[[ $release_kvod == /* ]] || release_kvod=$PWD/$release_kvod
case $command in
    throughput | latency | scale | spread | durable | matrix | all | selftest | permissions)
        [ -z "${KVOD_BENCH_PROGRAM:-}" ] || kvod_choice=(--kvod "$release_kvod") ;;
esac
kvod_log "kvod-bench ${command} ${kvod_choice[*]} $* (report: ${out}; load average: $(cut -d' ' -f1-3 /proc/loadavg))"
exec "$bench_program" "$command" "${kvod_choice[@]}" "$@" --markdown "$out"
