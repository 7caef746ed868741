#!/usr/bin/env bash
# CI smoke of the kvod-vs-Redis benchmark, so that it never rots: the checker self-test (kvod in both
# event encodings), a quarter-second throughput cell with full and compact kvod subscribers, then a
# sub-second version of the full run (`kvod-bench all --quick`: the throughput matrix, its set shapes at
# S = 1 (request ids, object values, a nested key path), and latency against
# kvod and redis-server, and smaller scale, spread and durable runs), and a small `kvod-bench client` run
# (the Swift client library against a raw socket). Exits 0 when everything ran and the
# report holds figures for every workload. It checks no performance figure: those come from full runs
# on a quiet machine (scripts/bench.sh). It does fail when a run lost, reordered or duplicated a
# delivery, or saw an error reply: those are bugs at any speed.
#
# Extra arguments go to `kvod-bench all` (e.g. `--seconds 2`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

report=$(mktemp "${TMPDIR:-/tmp}/kvod-bench-smoke.XXXXXX")
trap 'rm -f "$report"' EXIT

# Built once here; the three calls below only run (KVOD_BENCH_BUILT).
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
# KVOD_BENCH_PROGRAM (scripts/bench.sh): another kvod-bench to run, which is then not built here (CI's smoke).
kvod_log "swift build -c release (kvod$([ -n "${KVOD_BENCH_PROGRAM:-}" ] || echo ", kvod-bench"); kvod_release_build)"
kvod_release_build --product kvod
[ -n "${KVOD_BENCH_PROGRAM:-}" ] || kvod_release_build --product kvod-bench
export KVOD_BENCH_BUILT=1
bench_program=${KVOD_BENCH_PROGRAM:-$kvod_release_scratch/release/kvod-bench}
KVOD_BENCH_OUT=/dev/null scripts/bench.sh selftest
KVOD_BENCH_OUT=$report scripts/bench.sh all --quick --seconds 0.25 "$@"
# Compact events (issue 13): kvod's subscribers ask for them in hello; the row must have figures and event bytes.
compact=$(mktemp "${TMPDIR:-/tmp}/kvod-bench-compact.XXXXXX")
KVOD_BENCH_OUT=$compact scripts/bench.sh throughput --server kvod --subscribers 10 --bytes 64 --seconds 0.25 \
    --events full,compact >/dev/null
cat "$compact" >>"$report"
rm -f "$compact"

missing=()
for section in "Throughput:" "Latency:" "Scale:" "Spread:" "Durability:"; do
    grep -q "^#### ${section}" "$report" || missing+=("$section")
done
# One matrix row per (S, B) with numbers in it (a figure may carry the busy-machine mark †), and a
# latency row per server.
[ "$(grep -cE '^\| [0-9]+ \| [0-9]+ \| [0-9,]+ \| [0-9,]+( †)? \|' "$report")" -ge 6 ] || missing+=("matrix rows")
# One row per issue-13 set shape (string-id, object3-id, object10-id, object3-id-nested) at S = 1.
[ "$(grep -cE '^\| 1 \| [a-z0-9-]+-id[a-z-]* \| [0-9]+ \| [0-9,]+( †)? \| [0-9,]+( †)? \|' "$report")" -ge 4 ] || missing+=("set shape rows")
grep -qE '^\| kvod \| [0-9.]+ ms' "$report" || missing+=("kvod latency")
grep -qE '^\| kvod compact \| compact \| [0-9,]+ \| [0-9,]+( †)? \| x[0-9.]+ \| [0-9.]+ / [0-9.]+ \| [0-9,]+ \| [0-9,]+ \|' "$report" \
    || missing+=("compact events row")
grep -qE '^\| redis \| [0-9.]+ ms' "$report" || missing+=("redis latency")
# The Swift client library's cell (`kvod-bench client`), small (about a second): its rows must have figures.
client=$("$bench_program" client --events 20000 --sets 20000 --idle 1000)
printf '%s\n' "$client" >>"$report"
grep -qE '^\| events/s[^|]*\| [0-9]+ \| [0-9]+ \| [0-9.]+ \|' <<<"$client" || missing+=("client events row")
grep -qE '^\| sets/s[^|]*\| [0-9]+ \| [0-9]+ \| [0-9.]+ \|' <<<"$client" || missing+=("client sets row")
grep -qE '^\| [0-9]+ \| -?[0-9]+ KiB \|' <<<"$client" || missing+=("client memory row")
if [ "${#missing[@]}" -gt 0 ]; then
    printf 'bench-smoke: the report lacks: %s\n' "${missing[*]}" >&2
    exit 1
fi
echo "bench-smoke: ok" >&2
