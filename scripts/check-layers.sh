#!/usr/bin/env bash
# Checks the layering the target graph cannot check by itself (docs/design.md, "Layers"): exits 1, naming
# each offence, when
#
# - Package.swift gives KVOModel or KVOEngine a dependency beyond what their layer allows (KVOModel:
#   KVOJSON; KVOEngine: KVOModel, KVOJSON, CPCRE2). With such a dependency added, the imports below would
#   compile: this is the check that stops the edge from appearing quietly;
# - Package.swift gives a test target a dependency beyond the side it tests (docs/design.md, "CI": test targets
#   follow the module targets): KVOServerTests only the server's modules (never KVOClient, KVOWireProbe or
#   KVOTestSupport, so that a change to the client does not rebuild the server's tests), KVOClientTests and
#   KVOTestSupport only the client side (never the server's modules);
# - a file under Sources/KVOModel or Sources/KVOEngine imports a module of I/O, storage, transport, logging
#   or time (CLibUV, CSQLite, COpenSSL, CSodium, CNATS, CHTTPParser, CWSLay, Logging, Foundation, Dispatch) or
#   a layer above it (KVOServer, KVOClient, KVOWireProbe; KVOModel also KVOEngine and CPCRE2), in any form
#   (`@testable import`, `import struct CSQLite.…`, `@_implementationOnly import`, …). Most of these fail
#   to compile today because the targets do not depend on them; a system module (Foundation, Dispatch) or
#   a new dependency would not.
#
# - a file in a folder of Sources/KVOServer names a type of a folder its layer may not use
#   (scripts/check-folder-layers.py: the folders' allowed graph, itself checked to be acyclic).
#
# Needs python3 and swift (for `swift package dump-package`). Run from anywhere; CI runs it (.ci/run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

status=0
fail() { printf 'check-layers: %s\n' "$*" >&2; status=1; }

# Modules no pure layer may import.
io_modules='CLibUV|CSQLite|COpenSSL|CSodium|CNATS|CHTTPParser|CWSLay|Logging|Foundation|FoundationEssentials|Dispatch'
upper_modules='KVOServer|KVOClient|KVOWireProbe'

# check_imports DIRECTORY FORBIDDEN_REGEX
check_imports() {
    local directory=$1 forbidden=$2 hits
    [ -d "$directory" ] || { fail "$directory is missing"; return; }
    # `import X`, `import X.Y`, `import struct X.Y`, with attributes before it.
    hits=$(grep -rnE --include='*.swift' \
        "^[[:space:]]*(@[A-Za-z_]+[[:space:]]+)*import[[:space:]]+((typealias|struct|class|enum|protocol|let|var|func)[[:space:]]+)?($forbidden)([.[:space:]]|$)" \
        "$directory" || true)
    if [ -n "$hits" ]; then
        while IFS= read -r hit; do fail "forbidden import in $hit"; done <<<"$hits"
    fi
}

check_imports Sources/KVOModel "$io_modules|$upper_modules|KVOEngine|CPCRE2"
check_imports Sources/KVOEngine "$io_modules|$upper_modules"

# The targets' declared dependencies, from the manifest as SwiftPM reads it.
manifest=$(swift package dump-package) || { fail "swift package dump-package failed"; exit 1; }
KVOD_MANIFEST=$manifest python3 - <<'PY' || status=1
import json, os, sys

allowed = {
    "KVOModel": {"KVOJSON"},
    "KVOEngine": {"KVOModel", "KVOJSON", "CPCRE2"},
    "KVOServerTests": {"KVOServer", "KVOEngine", "KVOModel", "KVOJSON"},
    "KVOClientTests": {"KVOClient", "KVOJSON", "KVOWireProbe", "KVOTestSupport"},
    "KVOTestSupport": {"KVOJSON", "KVOWireProbe"},
}
package = json.loads(os.environ["KVOD_MANIFEST"])
targets = {target["name"]: target for target in package["targets"]}
failed = False
for name, permitted in allowed.items():
    if name not in targets:
        print(f"check-layers: target {name} is missing from Package.swift", file=sys.stderr)
        failed = True
        continue
    for dependency in targets[name].get("dependencies", []):
        # byName / target: [name, condition]; product: [name, package, moduleAliases, condition]
        kind, value = next(iter(dependency.items()))
        label = value[0] if kind != "product" else f"{value[0]} (product of {value[1]})"
        if kind == "product" or value[0] not in permitted:
            print(f"check-layers: {name} must not depend on {label} (allowed: {', '.join(sorted(permitted))})",
                  file=sys.stderr)
            failed = True
sys.exit(1 if failed else 0)
PY

# The folders inside KVOServer (one module: the compiler cannot tell them apart).
python3 scripts/check-folder-layers.py || status=1

if [ "$status" -eq 0 ]; then
    printf 'check-layers: KVOModel and KVOEngine import and depend only on what their layers allow; the test targets depend only on the side they test; the folders of KVOServer use only the folders below them\n' >&2
fi
exit "$status"
