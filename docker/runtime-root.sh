#!/bin/bash
# Assembles the kvod image's root file system in ROOT (default /rootfs), run by docker/Dockerfile's
# `runtime-root` stage on debian:bookworm-slim after it installed the libraries kvod links and created the
# user kvod. The final image is `FROM scratch` with ROOT copied in: the programs the image runs and the files
# they read, and nothing else (no package manager, no perl, no coreutils, no locales): about 50 MB instead of
# Debian's 78 MB base plus ours, and less for an attacker in the container to use.
#
# What goes in:
#   - the programs: kvod and kvoclient (/usr/local/bin), bash (the entrypoint and the health check are bash
#     scripts; /bin/sh is a link to it, for `docker exec CONTAINER sh`), each with every shared library it
#     loads (ldd's closure, the dynamic loader included) and the links that name them;
#   - /usr/local/bin/kvod-entrypoint and kvod-healthcheck (copied by the stage before this script runs);
#   - /etc/passwd, /etc/group (root and kvod), /etc/nsswitch.conf and /etc/hosts; kvod's data directory,
#     /var/lib/kvod (kvod:kvod, 0750), and /tmp (1777: SQLite's temporary files).
# Debian's merged /usr layout is kept (/bin, /lib and /lib64 are links into /usr), so the paths in the
# binaries (the loader's /lib64/ld-linux-x86-64.so.2) and in ldd's output resolve as they do on Debian.
#
# Run as root in the stage; prints one line per program with its library count.
set -euo pipefail
root=${1:-/rootfs}
programs=(/usr/local/bin/kvod /usr/local/bin/kvoclient /usr/bin/bash)
scripts=(/usr/local/bin/kvod-entrypoint /usr/local/bin/kvod-healthcheck)

[ ! -e "$root" ] || { echo "runtime-root: $root exists already" >&2; exit 1; }
mkdir -p "$root/usr/bin" "$root/usr/lib" "$root/usr/lib64" "$root/usr/sbin" "$root/usr/local/bin" "$root/etc"
for top in bin lib lib64 sbin; do
    ln -s "usr/$top" "$root/$top"
done

# Copies PATH into ROOT: the file it finally names, and each link on the way (a library's soname link, the
# loader's /usr/lib64 link), so the copy resolves as the original does. Directories are named by their real
# path (the merged /usr: /lib/x86_64-linux-gnu is /usr/lib/x86_64-linux-gnu).
copy_path() {
    local path=$1 real_dir
    while :; do
        real_dir=$(realpath "$(dirname "$path")")
        path=$real_dir/$(basename "$path")
        [ -e "$root$path" ] || [ -L "$root$path" ] || cp -a --parents "$path" "$root"
        [ -L "$path" ] || break
        local target
        target=$(readlink "$path")
        case $target in
            /*) path=$target ;;
            *) path=$real_dir/$target ;;
        esac
    done
}

for program in "${programs[@]}"; do
    copy_path "$program"
    # ldd's lines: "libx.so.1 => /path (0x…)" for each library, "/lib64/ld-linux-x86-64.so.2 (0x…)" for the
    # loader; linux-vdso has no file. A library ldd cannot find fails the build here, not at the first start.
    libraries=$(ldd "$program")
    if grep -q "not found" <<<"$libraries"; then
        echo "runtime-root: $program: a library is missing:" >&2
        grep "not found" <<<"$libraries" >&2
        exit 1
    fi
    count=0
    while read -r path; do
        copy_path "$path"
        count=$((count + 1))
    done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$libraries")
    echo "runtime-root: $program and $count libraries"
done
ln -s bash "$root/usr/bin/sh"
for script in "${scripts[@]}"; do
    cp -a "$script" "$root$script"
done

# Only the accounts the image runs as, and the name service files glibc reads.
grep -E '^(root|kvod):' /etc/passwd >"$root/etc/passwd"
grep -E '^(root|kvod):' /etc/group >"$root/etc/group"
cp -a /etc/nsswitch.conf /etc/hosts "$root/etc/"
install -d -o kvod -g kvod -m 0750 "$root/var/lib/kvod"
install -d -m 1777 "$root/tmp"
