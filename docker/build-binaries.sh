#!/usr/bin/env bash
# Builds the image's binaries into OUT (default /out): kvod and kvoclient, release, with the Swift standard
# library linked statically (the runtime stage has no Swift), stripped, each with a .gnu_debuglink to its
# debug symbols in OUT/debug (which gdb and eu-stack follow). One recipe for both ways the image gets them:
# the Dockerfile's `binaries-source` stage runs it inside the Swift image (what `docker build` does), and
# scripts/docker-smoke.sh runs it on the CI host, whose toolchain is the one the stand-in Swift image copies,
# then builds the image with KVOD_BINARIES=prebuilt (docs/design.md, "CI").
#
# Run from the repository root. SCRATCH (optional) is SwiftPM's build folder (default .build). The flags are
# scripts/setup.sh's kvod_release_build's (scripts/docker-smoke.sh checks that they agree), so on the CI host this
# build reuses the benchmark smoke's.
set -euo pipefail
out=${1:-/out}
scratch=${2:-.build}
build=(swift build -c release --static-swift-stdlib --scratch-path "$scratch")
"${build[@]}" --product kvod
"${build[@]}" --product kvoclient
bin=$("${build[@]}" --show-bin-path)
mkdir -p "$out/debug"
for binary in kvod kvoclient; do
    objcopy --only-keep-debug "$bin/$binary" "$out/debug/$binary.debug"
    strip --strip-all -o "$out/$binary" "$bin/$binary"
    objcopy --add-gnu-debuglink="$out/debug/$binary.debug" "$out/$binary"
done
