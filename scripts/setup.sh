# shellcheck shell=bash
# Shared set-up for scripts/run.sh and scripts/test.sh: sourced, not run.
#
# - moves to the repository root;
# - checks that the Swift toolchain is installed (and says how to get it when it is not);
# - installs libuv's, SQLite's, PCRE2's, OpenSSL's and libsodium's development files (Debian/Ubuntu:
#   libuv1-dev, libsqlite3-dev, libpcre2-dev, libssl-dev, libsodium-dev, libhttp-parser-dev, libwslay-dev,
#   libnats-dev) and pkg-config when `pkg-config --exists libuv` (or `sqlite3`, `libpcre2-8`, `openssl`,
#   `libsodium`, `libnats`) fails, and the openssl command (the TLS tests' certificates), with apt-get, as
#   root or through sudo. (nats-server 2.15 comes from PyPI into .venv: scripts/setup-python.sh.)
#
# Messages go to stderr so that stdout stays the product's own.

kvod_log() { printf '==> %s\n' "$*" >&2; }
kvod_fail() { printf 'error: %s\n' "$*" >&2; exit 1; }
# The release build (arguments: `--product kvod`, …): one set of flags for every release build, scripts/run.sh's,
# the benchmarks' and the image's (docker/build-binaries.sh spells the same flags: it runs where this file is not
# sourced), so that they share one build. The Swift standard library is linked statically, as the image needs
# (its runtime stage has no Swift); with other flags each would compile every module again. It goes to
# $kvod_release_scratch/release: .build-release/release, unless KVOD_RELEASE_SCRATCH names another build folder. A
# folder of its own, not .build: SwiftPM locks a build folder for a whole build, and scripts/test.sh compiles the
# release kvod beside the debug tests.
kvod_release_scratch=${KVOD_RELEASE_SCRATCH:-.build-release}
kvod_release_build() { swift build -c release --static-swift-stdlib --scratch-path "$kvod_release_scratch" "$@" >&2; }

cd "$(dirname "${BASH_SOURCE[0]}")/.." || kvod_fail "cannot enter the repository root"

if ! command -v swift >/dev/null 2>&1; then
    cat >&2 <<'MSG'
error: a Swift 6 toolchain is not installed or not on PATH.

Install it with swiftly, the official installer (https://www.swift.org/install/linux/):

    curl -O "https://download.swift.org/swiftly/linux/swiftly-$(uname -m).tar.gz"
    tar zxf "swiftly-$(uname -m).tar.gz"
    ./swiftly init --quiet-shell-followup
    . "${SWIFTLY_HOME_DIR:-$HOME/.local/share/swiftly}/env.sh"

or use the official Docker image (docker run -it swift:6.3-bookworm), then run this script again.
MSG
    exit 1
fi

# Runs a command as root: directly when we are root, through sudo when it exists.
kvod_as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        kvod_fail "need root to run '$*' (run as root or install sudo)"
    fi
}

kvod_missing=()
command -v pkg-config >/dev/null 2>&1 || kvod_missing+=(pkg-config)
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libuv; then
    kvod_missing+=(libuv1-dev)
fi
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists sqlite3; then
    kvod_missing+=(libsqlite3-dev)
fi

if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libpcre2-8; then
    kvod_missing+=(libpcre2-dev)
fi

# OpenSSL 3's development files for TLS (kvod's listener, kvoclient), and the openssl command the TLS tests
# make their throwaway certificates with.
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists openssl; then
    kvod_missing+=(libssl-dev)
fi
command -v openssl >/dev/null 2>&1 || kvod_missing+=(openssl)

# libsodium's development files for password hashes (Argon2id) and API token hashes.
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libsodium; then
    kvod_missing+=(libsodium-dev)
fi

# http-parser (the HTTP listener's request parser) and wslay (WebSocket framing): neither ships a
# pkg-config file, so their headers are looked for where Debian puts them.
[ -f /usr/include/http_parser.h ] || kvod_missing+=(libhttp-parser-dev)
[ -f /usr/include/wslay/wslay.h ] || kvod_missing+=(libwslay-dev)

# The NATS C client (the cluster's JetStream bridge, `--cluster`). The NATS server the cluster's tests and
# scripts/cluster.sh run is not Debian's 2.9 (out of support): scripts/setup-python.sh installs 2.15 into .venv.
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libnats; then
    kvod_missing+=(libnats-dev)
fi

if [ "${#kvod_missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 ||
        kvod_fail "missing ${kvod_missing[*]} and apt-get is not available: install libuv's, SQLite's, PCRE2's, OpenSSL's, libsodium's, http-parser's, wslay's and the NATS C client's development files, openssl and pkg-config with your package manager (Fedora: dnf install libuv-devel sqlite-devel pcre2-devel openssl-devel libsodium-devel http-parser-devel wslay-devel cnats-devel openssl pkgconf; macOS: brew install libuv sqlite pcre2 openssl@3 libsodium http-parser wslay cnats pkg-config)"
    kvod_log "installing ${kvod_missing[*]} with apt-get"
    kvod_as_root apt-get update
    kvod_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${kvod_missing[@]}"
    pkg-config --exists libuv || kvod_fail "libuv is still not visible to pkg-config after installing libuv1-dev"
    pkg-config --exists sqlite3 || kvod_fail "sqlite3 is still not visible to pkg-config after installing libsqlite3-dev"
    pkg-config --exists libpcre2-8 || kvod_fail "libpcre2-8 is still not visible to pkg-config after installing libpcre2-dev"
    pkg-config --exists openssl || kvod_fail "openssl is still not visible to pkg-config after installing libssl-dev"
    pkg-config --exists libsodium || kvod_fail "libsodium is still not visible to pkg-config after installing libsodium-dev"
    [ -f /usr/include/http_parser.h ] || kvod_fail "http_parser.h is still missing after installing libhttp-parser-dev"
    [ -f /usr/include/wslay/wslay.h ] || kvod_fail "wslay/wslay.h is still missing after installing libwslay-dev"
    pkg-config --exists libnats || kvod_fail "libnats is still not visible to pkg-config after installing libnats-dev"
fi

unset kvod_missing
