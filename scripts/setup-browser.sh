# shellcheck shell=bash
# The browser for the inspector's tests (Tests/Web/test_inspector_*.py), sourced by scripts/test-web.sh
# after scripts/setup.sh: Debian's chromium and chromium-driver, installed with apt-get when missing (selenium
# drives the system driver; nothing is downloaded at test time). Where apt-get is not available and no
# chromium is found, the browser tests skip themselves, saying so. Messages go to stderr.

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        kvod_log "installing chromium and chromium-driver with apt-get (the inspector's browser tests)"
        kvod_as_root apt-get update
        kvod_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver ||
            kvod_fail "apt-get could not install chromium and chromium-driver"
    else
        kvod_log "no chromium and no apt-get: the inspector's browser tests will be skipped"
    fi
fi
