#!/usr/bin/env bash
# The web tests (Tests/Web, pytest): the HTTP listener, WebSocket at /ws and /metrics against the real kvod
# binary, with Python's websockets and prometheus_client; the JavaScript client in node; the inspector page
# in chromium through selenium (scripts/setup-browser.sh installs it). Builds kvod when it is missing; sets up .venv
# (scripts/setup-python.sh). scripts/test.sh runs this after the Swift tests; arguments go to pytest,
# e.g. `scripts/test-web.sh -k hostile`.
set -euo pipefail

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# shellcheck source=scripts/setup-python.sh
source scripts/setup-python.sh
# shellcheck source=scripts/setup-browser.sh
source scripts/setup-browser.sh

export KVOD_BIN="${KVOD_BIN:-$PWD/.build/debug/kvod}"
[ -x "$KVOD_BIN" ] || { kvod_log "swift build --product kvod"; swift build --product kvod; }
export KVOCLIENT_BIN="${KVOCLIENT_BIN:-$(dirname "$KVOD_BIN")/kvoclient}"
[ -x "$KVOCLIENT_BIN" ] || { kvod_log "swift build --product kvoclient"; swift build --product kvoclient; }
kvod_log "pytest Tests/Web $*"
"$kvod_venv/bin/python" -m pytest -q -p no:cacheprovider Tests/Web "$@"
