#!/usr/bin/env bash
# A local kvod cluster on loopback: 3 nats-server nodes with JetStream (one NATS cluster, routes between
# them) and 3 kvod nodes replicating through the stream `kvod` (docs/design.md, "Cluster").
#
#     scripts/cluster.sh start     # set up what is missing, build, start all six, wait until they serve
#     scripts/cluster.sh status    # which processes run, and each kvod node's revision and state digest
#     scripts/cluster.sh stop      # SIGTERM to each, waiting for it to exit (SIGKILL after 10 s)
#
# Ports: NATS clients 4231-4233, NATS routes 6231-6233, NATS monitoring 8231-8233, kvod 7431-7433 (nodes
# n1, n2, n3). Everything lives under KVOD_CLUSTER_DIR (default ./kvod-cluster): nats.conf (the NATS
# servers' configuration file: `sync_interval: always`, docs/design.md, "NATS server settings"), nats-N/
# (JetStream data), kvod-N/ (kvod's data directory), logs/, pids/. `stop` keeps the data: a `start` after it resumes
# where the cluster stopped; remove the directory for a fresh cluster.
#
# KVOD_BUILD=debug uses (and builds) the debug binaries instead of release ones; KVOD_BIN=PATH uses an
# existing kvod without building.
set -euo pipefail

cluster_dir="${KVOD_CLUSTER_DIR:-kvod-cluster}"
build="${KVOD_BUILD:-release}"
nodes=(1 2 3)

nats_port() { echo $((4230 + $1)); }
route_port() { echo $((6230 + $1)); }
monitor_port() { echo $((8230 + $1)); }
kvod_port() { echo $((7430 + $1)); }

log() { printf '==> %s\n' "$*" >&2; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Whether the process in pid file $1 runs.
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Waits up to $2 seconds for a TCP port $1 on 127.0.0.1 to accept connections.
wait_for_port() {
    local deadline=$((SECONDS + $2))
    until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.1
    done
}

# The body of GET $2 on 127.0.0.1:$1 (HTTP/1.0: the server closes after it); nothing on failure.
http_get() {
    exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
    sed '1,/^\r\{0,1\}$/d' <&3
    exec 3>&-
}

# Sends one request line to kvod node $1 and prints the reply line.
request() {
    local reply
    exec 3<>"/dev/tcp/127.0.0.1/$(kvod_port "$1")" || return 1
    printf '%s\n' "$2" >&3
    IFS= read -r -t 5 reply <&3 || reply=""
    exec 3>&-
    printf '%s\n' "$reply"
}

start() {
    if [ -z "${KVOD_BIN:-}" ]; then
        # shellcheck source=scripts/setup.sh
        source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
        log "swift build -c $build"
        swift build -c "$build" >&2
        kvod_bin="$(pwd)/.build/$build/kvod"
    else
        kvod_bin="$KVOD_BIN"
    fi
    # nats-server 2.15 from .venv (KVOD_NATS_SERVER), set up like the tests' (scripts/setup-python.sh).
    if [ -z "${KVOD_NATS_SERVER:-}" ]; then
        # shellcheck source=scripts/setup.sh
        declare -F kvod_log >/dev/null || source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
        # shellcheck source=scripts/setup-python.sh
        source "$(dirname "${BASH_SOURCE[0]}")/setup-python.sh"
    fi
    mkdir -p "$cluster_dir/logs" "$cluster_dir/pids"
    cluster_dir="$(cd "$cluster_dir" && pwd)"
    # JetStream syncs each write to disk before acknowledging it (its default: every 2 minutes, so an
    # acknowledged write could be missing from a majority's disks after a power loss). Command-line flags
    # cannot set it; the flags below add the rest.
    printf '%s\n' '# kvod needs JetStream to fsync every write (docs/design.md, "NATS server settings").' \
        'jetstream {' '    sync_interval: always' '}' >"$cluster_dir/nats.conf"
    local routes="" urls="" n
    for n in "${nodes[@]}"; do
        routes+="${routes:+,}nats://127.0.0.1:$(route_port "$n")"
        urls+="${urls:+,}nats://127.0.0.1:$(nats_port "$n")"
    done
    for n in "${nodes[@]}"; do
        local pid="$cluster_dir/pids/nats-$n.pid"
        if running "$pid"; then log "nats-$n runs already"; continue; fi
        mkdir -p "$cluster_dir/nats-$n"
        "$KVOD_NATS_SERVER" -c "$cluster_dir/nats.conf" -a 127.0.0.1 -p "$(nats_port "$n")" -m "$(monitor_port "$n")" -js -sd "$cluster_dir/nats-$n" \
            -n "nats-$n" --cluster_name kvod --cluster "nats://127.0.0.1:$(route_port "$n")" --routes "$routes" \
            >>"$cluster_dir/logs/nats-$n.log" 2>&1 &
        echo $! >"$pid"
    done
    for n in "${nodes[@]}"; do
        wait_for_port "$(nats_port "$n")" 10 || fail "nats-$n did not start (see $cluster_dir/logs/nats-$n.log)"
    done
    log "nats-server on ports $(nats_port 1)-$(nats_port 3) (JetStream data in $cluster_dir/nats-N)"
    for n in "${nodes[@]}"; do
        local pid="$cluster_dir/pids/kvod-$n.pid"
        if running "$pid"; then log "kvod n$n runs already"; continue; fi
        "$kvod_bin" --host 127.0.0.1 --port "$(kvod_port "$n")" --data "$cluster_dir/kvod-$n" \
            --cluster "$urls" --cluster-stream kvod --node "n$n" \
            >>"$cluster_dir/logs/kvod-$n.log" 2>&1 &
        echo $! >"$pid"
    done
    for n in "${nodes[@]}"; do
        wait_for_port "$(kvod_port "$n")" 20 || fail "kvod n$n did not start (see $cluster_dir/logs/kvod-$n.log)"
    done
    log "kvod nodes n1, n2, n3 on ports $(kvod_port 1)-$(kvod_port 3) (logs in $cluster_dir/logs)"
}

stop_pid() {
    local pid_file="$1" name="$2"
    running "$pid_file" || { rm -f "$pid_file"; return 0; }
    local pid deadline
    pid="$(cat "$pid_file")"
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "$name did not stop within 10 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
    rm -f "$pid_file"
    log "stopped $name"
}

stop() {
    [ -d "$cluster_dir/pids" ] || { log "no cluster in $cluster_dir"; return 0; }
    local n
    # kvod first, so that no node is left without NATS.
    for n in "${nodes[@]}"; do stop_pid "$cluster_dir/pids/kvod-$n.pid" "kvod n$n"; done
    for n in "${nodes[@]}"; do stop_pid "$cluster_dir/pids/nats-$n.pid" "nats-$n"; done
}

status() {
    local n
    for n in "${nodes[@]}"; do
        if running "$cluster_dir/pids/nats-$n.pid"; then
            local sync="sync_interval: default (every 2 minutes)"
            http_get "$(monitor_port "$n")" /varz | grep -q '"sync_always": *true' && sync="sync_interval: always"
            echo "nats-$n  running  pid $(cat "$cluster_dir/pids/nats-$n.pid")  nats://127.0.0.1:$(nats_port "$n")  $sync"
        else
            echo "nats-$n  stopped"
        fi
    done
    for n in "${nodes[@]}"; do
        if running "$cluster_dir/pids/kvod-$n.pid"; then
            echo "kvod n$n  running  pid $(cat "$cluster_dir/pids/kvod-$n.pid")  127.0.0.1:$(kvod_port "$n")  $(request "$n" '{"op":"digest"}')"
        else
            echo "kvod n$n  stopped"
        fi
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
