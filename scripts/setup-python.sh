# shellcheck shell=bash
# Test tooling for Tests/Web, sourced by scripts/test-web.sh (after scripts/setup.sh): makes .venv at the
# repository root with the PyPI packages pinned in Tests/Web/requirements.txt (pytest, websockets,
# prometheus_client), installing python3 and python3-venv with apt-get when they are missing. The venv is
# rebuilt when requirements.txt changes. Messages go to stderr.

kvod_venv=.venv
kvod_requirements=Tests/Web/requirements.txt

if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || kvod_fail "the web tests need python3 with the venv module (Debian: python3 python3-venv)"
    kvod_log "installing python3 and python3-venv with apt-get"
    kvod_as_root apt-get update
    kvod_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv
fi

if [ ! -x "$kvod_venv/bin/python" ] || ! cmp -s "$kvod_requirements" "$kvod_venv/requirements.installed"; then
    kvod_log "creating $kvod_venv (pip install -r $kvod_requirements)"
    rm -rf "$kvod_venv"
    python3 -m venv "$kvod_venv" || kvod_fail "python3 -m venv failed"
    "$kvod_venv/bin/pip" install --quiet --disable-pip-version-check -r "$kvod_requirements" ||
        kvod_fail "pip could not install $kvod_requirements"
    cp "$kvod_requirements" "$kvod_venv/requirements.installed"
fi

unset kvod_requirements
