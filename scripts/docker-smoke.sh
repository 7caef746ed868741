#!/usr/bin/env bash
# Builds docker/Dockerfile, unchanged, with podman (its binaries compiled on this host by docker/build-binaries.sh,
# the recipe the Dockerfile's own compile stage runs, and taken with KVOD_BINARIES=prebuilt; KVOD_DOCKER_SOURCE_BUILD=1
# compiles them inside the Swift image as a user's `docker build` does) and smoke-tests the image the way
# docker/compose.yaml runs it: an admin user from KVOD_ADMIN_USER and a password file, TLS on 7421 with certificates from
# scripts/make-dev-certs.sh mounted read-only. Checks: a start with no users and no --insecure-open is
# refused (kvod's protected-mode line and the entrypoint's guidance); ping (inside the container and through
# the published port, without logging in); an unauthenticated request through the published port is refused
# (`unauthenticated`); the HTTP listener through its published port (/healthz and /readyz answer, /metrics
# refuses a request without a token and serves a server admin's); TLS through the published TLS port with `openssl s_client` from the host (certificate
# verified against the throwaway CA, auth, get); a create/subscribe/set round trip as the admin (kvoclient
# --user, KVOD_PASSWORD through `podman exec -e`); `kvod backup` of the running server as the image's user (its
# line, mode 0600); the HEALTHCHECK (`podman healthcheck run`: GET /healthz);
# the fixed non-root user (uid/gid 7420); data and the user kept across a container restart (the user is not
# added twice); a bind-mounted host directory owned by 7420:7420; its database deleted: the container stops
# with kvod's refusal naming the file, and starts empty with --init; and a clean exit on SIGTERM (exit code 0
# and the "stopped; event loop closed cleanly" log line). It prints the image's size, the base's and the
# binaries' (stripped, with a .gnu_debuglink to their symbols), and fails past KVOD_IMAGE_LIMIT_MB (100).
#
# Works on a machine with no Docker engine and no container registry (README.md, "Docker"): it installs podman, buildah, runc, debootstrap and openssl (the test certificates, `openssl s_client`) with apt-get when they are missing, and makes
# local stand-ins for the two base images the Dockerfile names, `debian:bookworm-slim` (debootstrap from
# the host's Debian mirror, slimmed as the official image is: no documentation, manual pages or
# translations; a cached stand-in made before that is made again) and `swift:<version>-bookworm` (that plus the official Swift image's build
# packages and the host's own Swift toolchain). The base images are cached in podman's storage: a second
# run skips them. Swift packages come from the host's package mirror when git rewrites github.com to a
# local directory (`git config url.<dir>.insteadOf`).
#
# Exit status: 0 when the smoke test passed, or when it was SKIPPED (one line saying why: not root, podman
# cannot run containers here, no network for apt-get or debootstrap); 1 when the image failed to build or
# misbehaved.
#
# Environment: KVOD_DOCKER_SMOKE_CACHE (default /var/tmp/kvod-docker-smoke) holds the podman settings;
# KVOD_DOCKER_SMOKE=skip skips the whole script.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=$SECONDS
say() { printf 'docker-smoke: %s\n' "$*" >&2; }
skip() { printf 'docker-smoke: SKIPPED: %s\n' "$*" >&2; exit 0; }
fail() {
    printf 'docker-smoke: FAILED: %s\n' "$*" >&2
    if [ -n "${container:-}" ] && podman container exists "$container" 2>/dev/null; then
        say "last log lines of $container:"
        podman logs --tail 20 "$container" >&2 || true
    fi
    exit 1
}

[ "${KVOD_DOCKER_SMOKE:-}" = skip ] && skip "KVOD_DOCKER_SMOKE=skip"
[ "$(id -u)" -eq 0 ] || skip "needs root (podman's storage, debootstrap); run it as root"

# --- Tools -------------------------------------------------------------------------------------------
missing=()
for tool in podman buildah runc debootstrap openssl readelf; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || skip "missing ${missing[*]} and there is no apt-get to install them"
    say "installing ${missing[*]} with apt-get"
    apt_options=(-o DPkg::Lock::Timeout=300 -o Acquire::Retries=2)
    if ! apt-get "${apt_options[@]}" update -qq >&2 ||
        ! DEBIAN_FRONTEND=noninteractive apt-get "${apt_options[@]}" install -y -qq \
            --no-install-recommends podman buildah runc debootstrap openssl binutils >&2; then
        skip "could not install ${missing[*]} with apt-get (no network for the package mirror?)"
    fi
fi

# Private podman settings (nothing system-wide changes): runc, because crun refuses a hybrid cgroup set-up
# ("cgroups in hybrid mode not supported"); explicit ulimits, because podman's defaults cannot be set where
# root lacks CAP_SYS_RESOURCE ("setrlimit RLIMIT_NOFILE: Operation not permitted").
cache=${KVOD_DOCKER_SMOKE_CACHE:-/var/tmp/kvod-docker-smoke}
mkdir -p "$cache"
cat >"$cache/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$cache/containers.conf"
# The docker image format keeps the HEALTHCHECK; the default OCI format drops it with only a warning.
export BUILDAH_FORMAT=docker

podman info >/dev/null 2>&1 || skip "podman cannot run here: $(podman info 2>&1 | tail -n 1)"

# --- Base images -------------------------------------------------------------------------------------
# The Dockerfile's own FROM lines name them.
swift_image=$(awk 'toupper($1) == "FROM" && $2 ~ /^swift:/ { print $2; exit }' docker/Dockerfile)
debian_image=$(awk 'toupper($1) == "FROM" && $2 ~ /^debian:/ { print $2; exit }' docker/Dockerfile)
[ -n "$swift_image" ] && [ -n "$debian_image" ] || fail "docker/Dockerfile no longer starts FROM swift:… and debian:…"

# The host's Debian mirror, from apt's sources (one-line or deb822 format).
apt_mirror() {
    local want=$1  # "main" or "security"
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\2/p' |
        awk -v want="$want" '(want == "security") == ($0 ~ /security/) && !found { print; found = 1 }' || true
}

# The official -slim images exclude these from every package (debuerreotype's slimify), and keep
# /etc/dpkg/dpkg.cfg.d/docker saying so, so that apt-get in a later layer adds none either. Without them
# the stand-in weighs about 46 MB more than the official image and the image's reported size with it.
slim_config='# The "slim" variant: files normally unnecessary in containers are excluded (as in the official image).
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*'
if podman image exists "localhost/$debian_image" &&
    ! podman run --rm --entrypoint test "localhost/$debian_image" -e /etc/dpkg/dpkg.cfg.d/docker >/dev/null 2>&1; then
    say "base image localhost/$debian_image was made without the -slim exclusions: making it again"
    podman rmi "localhost/$debian_image" >/dev/null 2>&1 || podman untag "localhost/$debian_image" >/dev/null 2>&1 || true
fi
if podman image exists "localhost/$debian_image"; then
    say "base image localhost/$debian_image: cached"
else
    mirror=$(apt_mirror main)
    mirror=${mirror:-http://deb.debian.org/debian}
    security=$(apt_mirror security)
    security=${security:-http://deb.debian.org/debian-security}
    suite=${debian_image#debian:}
    suite=${suite%-slim}
    rootfs=$(mktemp -d /var/tmp/kvod-debian-rootfs.XXXXXX)
    say "making localhost/$debian_image with debootstrap from $mirror"
    if ! debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1; then
        tail -n 5 "$cache/debootstrap.log" >&2
        rm -rf "$rootfs"
        skip "debootstrap $suite failed (no network for $mirror?): see $cache/debootstrap.log"
    fi
    rm -f "$rootfs/etc/apt/sources.list"
    cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    # As in the official image: apt keeps no package cache in a layer.
    cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    printf '%s\n' "$slim_config" >"$rootfs/etc/dpkg/dpkg.cfg.d/docker"
    find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$rootfs"/usr/share/groff/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/linda/* \
        "$rootfs"/usr/share/lintian/overrides/* "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/man/*
    tar -C "$rootfs" -c . | podman import --change 'CMD ["bash"]' - "localhost/$debian_image" >/dev/null ||
        fail "podman import of the debootstrap tree failed"
    rm -rf "$rootfs"
fi

if podman image exists "localhost/$swift_image"; then
    say "base image localhost/$swift_image: cached"
else
    command -v swift >/dev/null 2>&1 || skip "no Swift toolchain on the host to make localhost/$swift_image from"
    wanted=${swift_image#swift:}
    wanted=${wanted%%-*}
    host_version=$(swift --version 2>&1 | sed -n 's/.*Swift version \([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)
    [ "$host_version" = "$wanted" ] ||
        skip "the Dockerfile wants Swift $wanted, the host has $host_version: cannot stand in for $swift_image"
    toolchain=$(dirname "$(readlink -f "$(command -v swift)")")
    toolchain=${toolchain%/usr/bin}
    [ -x "$toolchain/usr/bin/swift" ] || fail "cannot find the host toolchain's prefix (looked at $toolchain)"
    say "making localhost/$swift_image from localhost/$debian_image and the toolchain in $toolchain (a few minutes)"
    context=$(mktemp -d /var/tmp/kvod-swift-image.XXXXXX)
    # The official image's build packages, then the host's toolchain.
    cat >"$context/Containerfile" <<EOF
FROM localhost/$debian_image
RUN apt-get update \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
       binutils git gnupg2 libc6-dev libcurl4-openssl-dev libedit2 libgcc-12-dev libpython3-dev \\
       libsqlite3-0 libstdc++-12-dev libxml2-dev libncurses-dev libz3-dev pkg-config tzdata zlib1g-dev \\
       ca-certificates \\
    && rm -rf /var/lib/apt/lists/* \\
    && cp -a /toolchain/usr/. /usr/
EOF
    if ! podman build --pull=never -v "$toolchain:/toolchain:ro" -t "localhost/$swift_image" \
        -f "$context/Containerfile" "$context" >"$cache/swift-image.log" 2>&1; then
        tail -n 10 "$cache/swift-image.log" >&2
        rm -rf "$context"
        if grep -qiE 'temporary failure|could not resolve|unable to connect|failed to fetch' "$cache/swift-image.log"; then
            skip "no network for apt-get inside the build: see $cache/swift-image.log"
        fi
        fail "building localhost/$swift_image failed: see $cache/swift-image.log"
    fi
    rm -rf "$context"
fi
say "base images ready after $((SECONDS - started)) s"

# --- The image ---------------------------------------------------------------------------------------
# Swift packages: where git rewrites github.com to a local mirror, mount the mirror at the same path and
# give the build a gitconfig holding only those rewrites.
build_mounts=()
gitconfig="$cache/gitconfig"
: >"$gitconfig"
while read -r key value; do
    base=${key#url.}
    base=${base%.insteadof}
    git config --file "$gitconfig" --add "url.$base.insteadOf" "$value"
    if [ -d "$base" ]; then
        case " ${build_mounts[*]-} " in *" $base:$base:ro "*) ;; *) build_mounts+=(-v "$base:$base:ro") ;; esac
    fi
done < <(git config --get-regexp '^url\.' || true)
[ -s "$gitconfig" ] && build_mounts+=(-v "$gitconfig:/etc/gitconfig:ro")

# The stage that compiles the binaries in the Swift image must install every development package the host's
# set-up installs (a new system library added to scripts/setup.sh and not to the Dockerfile would break
# `docker build` for users while the prebuilt path below still passed).
for package in $(grep -o 'kvod_missing+=([a-z0-9.-]*-dev)' scripts/setup.sh | sed 's/.*(\(.*\))/\1/' | sort -u); do
    awk '/^FROM .* AS binaries-source/ { in_stage = 1; next } /^FROM / { in_stage = 0 } in_stage' docker/Dockerfile |
        grep -qw -- "$package" || fail "docker/Dockerfile's binaries-source stage does not install $package (scripts/setup.sh does)"
done

# The image's release build and every other one (scripts/setup.sh's kvod_release_build) use the same flags: so the
# host build below reuses .build/release, and the image's binaries are built as the benchmarks' are.
release_flags=$(sed -n 's/^kvod_release_build() { swift build \(.*\) --scratch-path .*$/\1/p' scripts/setup.sh)
[ -n "$release_flags" ] || fail "scripts/setup.sh has no kvod_release_build line this check understands"
grep -qF "build=(swift build $release_flags --scratch-path" docker/build-binaries.sh ||
    fail "docker/build-binaries.sh does not build with kvod_release_build's flags ($release_flags)"

# Where the binaries come from. By default they are compiled on this host by docker/build-binaries.sh (the
# recipe the Dockerfile's binaries-source stage runs, with the toolchain the stand-in Swift image copies),
# and the image takes them (KVOD_BINARIES=prebuilt): no compile inside the image. With the flags of every release
# build (scripts/setup.sh's kvod_release_build, checked below), it reuses the benchmark smoke's modules in
# .build/release and only links. KVOD_DOCKER_SOURCE_BUILD=1 builds exactly as a user's `docker build`
# does, compiling inside the Swift image (several minutes more).
binaries_args=()
if [ "${KVOD_DOCKER_SOURCE_BUILD:-0}" != 1 ]; then
    command -v swift >/dev/null 2>&1 || fail "no Swift toolchain on the host for the prebuilt binaries (KVOD_DOCKER_SOURCE_BUILD=1 compiles in the image)"
    say "compiling kvod and kvoclient on the host (docker/build-binaries.sh; KVOD_DOCKER_SOURCE_BUILD=1 compiles in the image instead)"
    rm -rf .build-docker
    binaries_started=$SECONDS
    docker/build-binaries.sh .build-docker "${KVOD_RELEASE_SCRATCH:-.build-release}" >"$cache/binaries.log" 2>&1 || {
        tail -n 30 "$cache/binaries.log" >&2
        fail "docker/build-binaries.sh failed: see $cache/binaries.log"
    }
    say "binaries built in $((SECONDS - binaries_started)) s"
    binaries_args=(--build-arg KVOD_BINARIES=prebuilt)
fi

tag=localhost/kvod:smoke
say "building $tag from docker/Dockerfile (${binaries_args[*]:-KVOD_BINARIES=source})"
build_started=$SECONDS
# Its id, not the tag, from here on: another run building at the same time moves the tag.
commit=$(git rev-parse HEAD 2>/dev/null || true)
if ! podman build --format docker --pull=never ${build_mounts[@]+"${build_mounts[@]}"} --iidfile "$cache/iid.$$" \
    ${binaries_args[@]+"${binaries_args[@]}"} --build-arg "KVOD_COMMIT=$commit" -f docker/Dockerfile -t "$tag" . \
    >"$cache/kvod-image.log" 2>&1; then
    tail -n 30 "$cache/kvod-image.log" >&2
    rm -rf .build-docker
    fail "building the image from docker/Dockerfile failed: see $cache/kvod-image.log"
fi
rm -rf .build-docker
image=$(cat "$cache/iid.$$")
rm -f "$cache/iid.$$"
say "image built in $((SECONDS - build_started)) s"

# --- Size --------------------------------------------------------------------------------------------
megabytes() { awk '{ printf "%.1f MB", $1 / 1000000 }'; }
image_bytes=$(podman image inspect --format '{{.Size}}' "$image")
binaries=$(mktemp -d /var/tmp/kvod-smoke-binaries.XXXXXX)
sizes_container=$(podman create "$image" 2>/dev/null) || fail "podman create $image failed"
for binary in kvod kvoclient; do
    podman cp "$sizes_container:/usr/local/bin/$binary" "$binaries/$binary" || fail "podman cp $binary out of the image failed"
done
podman rm -f "$sizes_container" >/dev/null 2>&1 || true
binary_sizes=
for binary in kvod kvoclient; do
    sections=$(readelf -S --wide "$binaries/$binary")
    case $sections in *" .symtab "*) fail "/usr/local/bin/$binary in the image is not stripped (it has a .symtab)" ;; esac
    case $sections in *" .gnu_debuglink "*) ;; *) fail "/usr/local/bin/$binary has no .gnu_debuglink to its debug symbols" ;; esac
    binary_sizes="$binary_sizes, $binary $(stat -c %s "$binaries/$binary" | megabytes)"
done
rm -rf "$binaries"
image_limit=${KVOD_IMAGE_LIMIT_MB:-100}
say "image size: $(megabytes <<<"$image_bytes") (no base image: docker/runtime-root.sh's files$binary_sizes, stripped)"
[ "$image_bytes" -le $((image_limit * 1000000)) ] ||
    fail "the image is $(megabytes <<<"$image_bytes"), over KVOD_IMAGE_LIMIT_MB=$image_limit: see what grew with podman history $tag"

# --- Smoke test --------------------------------------------------------------------------------------
container=kvod-smoke-$$
volume=kvod-smoke-data-$$
bind_dir=$(mktemp -d /var/tmp/kvod-smoke-bind.XXXXXX)
secrets=$(mktemp -d /var/tmp/kvod-smoke-secrets.XXXXXX)
cleanup() {
    [ -n "${tls_pid:-}" ] && kill "$tls_pid" 2>/dev/null
    # One at a time: `podman rm` given a name that does not exist leaves the other containers running.
    for name in "$container" "$container-bind" "$container-open"; do
        podman rm -f -v -t 0 "$name" >/dev/null 2>&1 || true
    done
    podman volume rm -f "$volume" >/dev/null 2>&1 || true
    rm -rf "$bind_dir" "$secrets"
    # Every run leaves the previous image and its build stage's layers untagged; those older than a day
    # go, so that repeated runs (CI) do not fill the disk, while today's build cache stays.
    podman image prune -f --filter until=24h >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Waits until kvoclient ping answers inside the container.
wait_ready() {
    local name=$1
    for _ in $(seq 1 100); do
        podman exec "$name" kvoclient ping >/dev/null 2>&1 && return 0
        [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] || fail "$name exited: $(podman logs --tail 5 "$name" 2>&1)"
        sleep 0.2
    done
    fail "kvod in $name did not answer ping within 20 s"
}

# The secrets docker/compose.yaml asks for: an admin password file and a throwaway CA's server certificate.
# The container's user (uid 7420) reads them through a read-only mount.
chmod 0755 "$secrets"
scripts/make-dev-certs.sh "$secrets" >/dev/null || fail "scripts/make-dev-certs.sh failed"
rm -f "$secrets/ca.key"
password=$(openssl rand -hex 16)
printf '%s\n' "$password" >"$secrets/admin-password"
chmod 0644 "$secrets/admin-password"
run_secure=(-e KVOD_ADMIN_USER=admin -e KVOD_ADMIN_PASSWORD_FILE=/run/kvod-secrets/admin-password
    -e KVOD_TLS_CERT_FILE=/run/kvod-secrets/server.pem -e KVOD_TLS_KEY_FILE=/run/kvod-secrets/server.key
    -v "$secrets:/run/kvod-secrets:ro")
client() { podman exec -e KVOD_PASSWORD="$password" "$container" kvoclient --user admin "$@"; }

# Every library the binaries link is in the image: the dynamic loader refuses to start a program with one
# missing (the image has no ldd; docker/runtime-root.sh checked ldd's list when it copied them).
for binary in kvod kvoclient; do
    answer=$(podman run --rm --entrypoint "$binary" "$image" --version 2>&1) || fail "$binary --version in the image: $answer"
done
say "ok: kvod and kvoclient start in the image (every library they link is there)"

# The commit the image was built from, as kvod reports it (the build argument standing in for .git).
version=$(podman run --rm --entrypoint kvod "$image" --version 2>"$cache/version.err") ||
    fail "kvod --version in the image: $(cat "$cache/version.err")"
if [ -n "$commit" ]; then
    [[ "$version" == *"(${commit:0:7})"* ]] || fail "kvod --version in the image says '$version', not commit ${commit:0:7}"
fi
say "ok: kvod --version in the image: $version"

healthcheck=$(podman image inspect --format '{{json .Config.Healthcheck}}' "$image")
case $healthcheck in *kvod-healthcheck*) ;; *) fail "the image has no HEALTHCHECK (built in OCI format?): $healthcheck" ;; esac

# Protected mode: no users, no --insecure-open, a listener on 0.0.0.0: kvod refuses to start, with its own
# line and the entrypoint's guidance in the container's log.
open_status=0
open_log=$(timeout 60 podman run --name "$container-open" "$image" 2>&1) || open_status=$?
[ "$open_status" -ne 0 ] || fail "kvod started on 0.0.0.0 with no users and no --insecure-open: $open_log"
open_log=$(podman logs "$container-open" 2>&1)
grep -q 'refusing to serve 0.0.0.0:7420 with no users defined' <<<"$open_log" ||
    fail "no protected-mode refusal in the log of a start without users: $open_log"
grep -q 'kvod-entrypoint: no users in /var/lib/kvod: set KVOD_ADMIN_USER' <<<"$open_log" ||
    fail "no guidance line from the entrypoint: $open_log"
# -v: its anonymous /var/lib/kvod volume goes with it.
podman rm -f -v "$container-open" >/dev/null 2>&1 || true
say "ok: a start with no users and no --insecure-open is refused (exit $open_status) with kvod's line"

# Without systemd podman cannot schedule health checks and says so on every start; they run on demand
# here (`podman healthcheck run`), so that complaint goes to a file.
podman run -d --name "$container" -p 127.0.0.1::7420 -p 127.0.0.1::7421 -p 127.0.0.1::7480 "${run_secure[@]}" \
    -v "$volume:/var/lib/kvod" "$image" >/dev/null 2>"$cache/run.err" ||
    fail "podman run failed: $(cat "$cache/run.err")"
wait_ready "$container"
logs=$(podman logs "$container" 2>&1)
grep -q "added user 'admin'" <<<"$logs" || fail "the entrypoint did not add the admin user: $logs"
grep -q 'listening for TLS on 0.0.0.0:7421' <<<"$logs" || fail "kvod does not listen for TLS on 7421: $logs"
grep -q 'listening for HTTP on 0.0.0.0:7480' <<<"$logs" || fail "kvod does not listen for HTTP on 7480: $logs"
say "ok: ping inside the container (admin user added, TLS listener on 7421, HTTP on 7480)"

# Ping through the published port, with the protocol itself.
port=$(podman port "$container" 7420/tcp | sed 's/.*://' | head -n 1)
exec 3<>"/dev/tcp/127.0.0.1/$port" || fail "cannot connect to the published port 127.0.0.1:$port"
printf '{"op":"ping","id":1}\n' >&3
IFS= read -r -t 10 reply <&3 || fail "no reply to ping on 127.0.0.1:$port"
case $reply in *'"ok":true'*) ;; *) fail "ping on the published port answered: $reply" ;; esac
say "ok: ping through the published port 127.0.0.1:$port"
printf '{"op":"list","id":2}\n' >&3
IFS= read -r -t 10 reply <&3 || fail "no reply to an unauthenticated list on 127.0.0.1:$port"
exec 3<&-
case $reply in *'"ok":false'*'"unauthenticated"'*) ;; *) fail "an unauthenticated list answered: $reply" ;; esac
say "ok: an unauthenticated request is refused (unauthenticated)"

# HTTP through the published port, as a probe or Prometheus outside the container would ask. Sets
# http_status (the status line) and http_body.
http_get() {
    local port=$1 path=$2 token=${3:-} line headers=
    [ -n "$token" ] && headers="Authorization: Bearer $token"$'\r\n'
    exec 4<>"/dev/tcp/127.0.0.1/$port" || fail "cannot connect to the published HTTP port 127.0.0.1:$port"
    printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n%sConnection: close\r\n\r\n' "$path" "$port" "$headers" >&4
    IFS= read -r -t 10 http_status <&4 || fail "no answer to GET $path on 127.0.0.1:$port"
    http_status=${http_status%$'\r'}
    while IFS= read -r -t 10 line <&4 && [ -n "${line%$'\r'}" ]; do :; done
    http_body=$(timeout 10 cat <&4) || true
    exec 4<&-
}
http_port=$(podman port "$container" 7480/tcp | sed 's/.*://' | head -n 1)
http_get "$http_port" /healthz
[ "$http_status" = "HTTP/1.1 200 OK" ] && [ "$http_body" = ok ] || fail "GET /healthz answered $http_status: $http_body"
http_get "$http_port" /readyz
[ "$http_status" = "HTTP/1.1 200 OK" ] || fail "GET /readyz answered $http_status: $http_body"
http_get "$http_port" /metrics
case $http_status in "HTTP/1.1 401 "*) ;; *) fail "GET /metrics without a token answered $http_status (users are defined: 401 expected)" ;; esac
metrics_token=$(client user token add admin) || fail "kvoclient user token add admin failed"
http_get "$http_port" /metrics "$metrics_token"
[ "$http_status" = "HTTP/1.1 200 OK" ] || fail "GET /metrics with the admin's token answered $http_status: $http_body"
grep -q '^kvod_build_info{' <<<"$http_body" || fail "GET /metrics has no kvod_build_info: $(head -c 300 <<<"$http_body")"
say "ok: HTTP on the published port 127.0.0.1:$http_port (/healthz, /readyz; /metrics 401 without a token, served with the admin's)"

# TLS through the published TLS port, from the host: the certificate must verify against the throwaway CA
# for the name localhost; then auth and a request over the encrypted connection.
tls_port=$(podman port "$container" 7421/tcp | sed 's/.*://' | head -n 1)
coproc TLS { exec openssl s_client -connect "127.0.0.1:$tls_port" -servername localhost -verify_hostname localhost \
    -CAfile "$secrets/ca.pem" -verify_return_error -quiet 2>"$cache/s_client.err"; }
tls_pid=$TLS_PID
printf '{"op":"auth","id":1,"user":"admin","password":"%s"}\n{"op":"list","id":2}\n' "$password" >&"${TLS[1]}"
IFS= read -r -t 20 auth_reply <&"${TLS[0]}" || fail "no auth reply over TLS on 127.0.0.1:$tls_port: $(cat "$cache/s_client.err")"
IFS= read -r -t 20 list_reply <&"${TLS[0]}" || fail "no list reply over TLS: $(cat "$cache/s_client.err")"
kill "$tls_pid" 2>/dev/null; wait "$tls_pid" 2>/dev/null || true; tls_pid=
case $auth_reply in *'"ok":true'*'"user":"admin"'*) ;; *) fail "auth over TLS answered: $auth_reply" ;; esac
case $list_reply in *'"ok":true'*) ;; *) fail "list over TLS answered: $list_reply" ;; esac
grep -q 'Verify return code: 0' "$cache/s_client.err" 2>/dev/null || grep -q 'verify return:1' "$cache/s_client.err" ||
    fail "openssl s_client did not verify kvod's certificate: $(cat "$cache/s_client.err")"
say "ok: TLS on the published port 127.0.0.1:$tls_port (verified against the CA, auth, list)"

# kvod's own ids (PID 1's real uid and gid, from /proc: the image has no `id`).
user=$(podman exec "$container" bash -c 'while read -r key id _; do case $key in Uid:) uid=$id ;; Gid:) gid=$id ;; esac; done </proc/1/status; echo "$uid:$gid"')
[ "$user" = 7420:7420 ] || fail "kvod runs as uid:gid $user, not the documented 7420:7420"
say "ok: runs as the non-root user kvod, 7420:7420"

health=$(podman healthcheck run "$container" 2>&1) || fail "podman healthcheck run: $health"
say "ok: health check ${health:-passed}"

# Round trip: a subscriber sees a set made by another client.
client create smoke '{"greeting":"hello"}' >/dev/null || fail "kvoclient create failed"
events="$cache/subscribe.out"
# Emptied here, before the subscriber starts: $cache outlives a run, and the background job's own `>` may
# run after the first poll below, which would then read the previous run's events.
: >"$events"
podman exec -e KVOD_PASSWORD="$password" "$container" kvoclient --user admin subscribe smoke greeting --options initial,new --count 2 >"$events" 2>&1 &
subscriber=$!
for _ in $(seq 1 50); do grep -q 'smoke.greeting  initial' "$events" && break; sleep 0.2; done
grep -q 'smoke.greeting  initial' "$events" || fail "subscribe printed no initial event: $(cat "$events")"
client set smoke greeting '"world"' >/dev/null || fail "kvoclient set failed"
waited=0
while kill -0 "$subscriber" 2>/dev/null && [ $waited -lt 100 ]; do sleep 0.2; waited=$((waited + 1)); done
kill -0 "$subscriber" 2>/dev/null && { kill "$subscriber"; fail "subscribe did not end after the set: $(cat "$events")"; }
wait "$subscriber" || fail "subscribe failed: $(cat "$events")"
grep -q 'smoke.greeting  valueChanged  rev=[0-9]*  new="world"' "$events" ||
    fail "subscribe did not print the change: $(cat "$events")"
say "ok: create, subscribe, set round trip"

# A backup of the running server, as the image's user, into its own volume (kvod backup: docs/protocol.md).
backup=$(podman exec "$container" kvod backup --data /var/lib/kvod /var/lib/kvod/smoke-backup.sqlite3 2>&1) ||
    fail "kvod backup inside the container failed: $backup"
grep -q '^wrote /var/lib/kvod/smoke-backup.sqlite3: revision [0-9]*, 1 object' <<<"$backup" || fail "kvod backup printed: $backup"
# Its mode, read on the host through the volume's directory (the image has no `stat`).
mode=$(stat -c %a "$(podman volume inspect --format '{{.Mountpoint}}' "$volume")/smoke-backup.sqlite3") || fail "no backup file"
[ "$mode" = 600 ] || fail "the backup is mode $mode, not 600"
say "ok: kvod backup of the running server ($backup)"

# SIGTERM: a clean exit with its log line.
podman kill --signal TERM "$container" >/dev/null
status=$(timeout 30 podman wait "$container") || fail "kvod did not exit within 30 s of SIGTERM"
[ "$status" = 0 ] || fail "kvod exited with status $status after SIGTERM"
# The log in a variable first: `podman logs | grep -q` fails under pipefail when grep stops reading early.
logs=$(podman logs "$container" 2>&1)
grep -q 'received signal SIGTERM' <<<"$logs" || fail "no 'received signal SIGTERM' log line"
grep -q 'stopped; event loop closed cleanly' <<<"$logs" || fail "no clean-stop log line after SIGTERM"
say "ok: SIGTERM exits 0 with 'stopped; event loop closed cleanly'"

# Data kept across a restart of the container (the named volume).
podman start "$container" >/dev/null 2>"$cache/run.err" || fail "podman start failed: $(cat "$cache/run.err")"
wait_ready "$container"
value=$(client get smoke greeting) || fail "kvoclient get after the restart failed"
[ "$value" = '"world"' ] || fail "after a restart smoke.greeting is $value, not \"world\""
logs=$(podman logs "$container" 2>&1)
grep -q "user 'admin' exists already" <<<"$logs" || fail "the entrypoint did not keep the existing user: $logs"
say "ok: data and the admin user kept across a container restart"

# A bind-mounted host directory owned by the documented uid/gid.
chown 7420:7420 "$bind_dir"
podman run -d --name "$container-bind" "${run_secure[@]}" -v "$bind_dir:/var/lib/kvod" "$image" >/dev/null 2>"$cache/run.err" ||
    fail "podman run with a bind mount failed: $(cat "$cache/run.err")"
wait_ready "$container-bind"
podman exec -e KVOD_PASSWORD="$password" "$container-bind" kvoclient --user admin create bound >/dev/null || fail "create in a bind-mounted data directory failed"
[ -f "$bind_dir/kvod.sqlite3" ] && [ -f "$bind_dir/kvod.id" ] || fail "no kvod.sqlite3 and kvod.id in the bind-mounted directory"
say "ok: bind-mounted data directory owned by 7420:7420"

# Its database lost (a failed restore): the container stops with kvod's refusal naming the file, not an
# empty server; --init (appended to the container's arguments) starts it empty on purpose.
podman stop -t 10 "$container-bind" >/dev/null || fail "podman stop $container-bind failed"
rm -f "$bind_dir/kvod.sqlite3"
podman start "$container-bind" >/dev/null 2>"$cache/run.err" || true
lost_status=$(timeout 30 podman wait "$container-bind") || fail "the container on a lost database did not stop within 30 s"
lost_log=$(podman logs "$container-bind" 2>&1)
[ "$lost_status" != 0 ] && grep -q "cannot use the database '/var/lib/kvod/kvod.sqlite3': it is missing, but this data directory held one" <<<"$lost_log" ||
    fail "a lost database did not stop the container (status $lost_status) with kvod's refusal: $lost_log"
podman rm -f -v "$container-bind" >/dev/null 2>&1 || true
podman run -d --name "$container-bind" "${run_secure[@]}" -v "$bind_dir:/var/lib/kvod" "$image" --init >/dev/null 2>"$cache/run.err" ||
    fail "podman run with --init failed: $(cat "$cache/run.err")"
wait_ready "$container-bind"
[ -s "$bind_dir/kvod.sqlite3" ] || fail "--init did not start a new database"
say "ok: a lost database stops the container with kvod's refusal; --init starts it empty"

say "PASSED in $((SECONDS - started)) s"
