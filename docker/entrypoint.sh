#!/bin/bash
# The kvod image's ENTRYPOINT. Runs as the image's user kvod (uid 7420), then replaces itself with
#
#     kvod --host 0.0.0.0 --port 7420 --http-port 7480 --http-host 0.0.0.0 --data /var/lib/kvod [TLS flags] "$@"
#
# so kvod is PID 1: it gets SIGTERM (clean stop) and SIGHUP (TLS certificate reload) itself. Arguments
# given to the container (compose `command:`) are appended; a later flag overrides an earlier one.
# The users live in /var/lib/kvod with the data: do not move it with --data.
#
# The HTTP listener on 7480 serves /healthz and /readyz (the image's HEALTHCHECK, docker/healthcheck.sh),
# /metrics (with users defined, off loopback: only with a server admin's API token, `Authorization: Bearer`),
# the WebSocket /ws (logging in as on 7420) and the inspector at /.
#
# --init among the arguments (a database lost from the volume, started empty on purpose: README,
# "Operations") also goes to the `kvod user` commands below, which open the same database first.
#
# Environment (all optional):
#   KVOD_ADMIN_USER           create this user with the rules *=read,write,admin on the first start, when it
#                             does not exist yet in /var/lib/kvod (later starts leave it alone: change its
#                             password with `kvoclient user passwd`, not by changing the secret);
#   KVOD_ADMIN_PASSWORD_FILE  file holding its password (a compose or Docker secret; one trailing newline
#                             is ignored), or
#   KVOD_ADMIN_PASSWORD       the password itself (visible in `docker inspect`: prefer the file);
#   KVOD_TLS_CERT_FILE, KVOD_TLS_KEY_FILE
#                             PEM certificate (with intermediates) and unencrypted key: kvod also listens
#                             for TLS on port 7421 (--tls-port 7421 --tls-cert … --tls-key …). Both or neither.
#                             uid 7420 must be able to read them.
# The password reaches `kvod user add` through KVOD_PASSWORD in its environment only, never its arguments,
# and is removed from the environment before kvod starts.
#
# Without users kvod refuses to listen on 0.0.0.0 (protected mode) unless --insecure-open is given; the
# entrypoint then prints one line saying what to set before kvod prints its own refusal.
set -eu

data=/var/lib/kvod
say() { printf 'kvod-entrypoint: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

init=
case " $* " in *" --init "*) init=--init ;; esac

admin_user=${KVOD_ADMIN_USER:-}
if [ -n "$admin_user" ]; then
    # kvod user's own line says what is wrong with the data directory (a lost database, permissions, …).
    users=$(kvod user list --data "$data" $init) || die "cannot read the users in $data (see the line above)"
    # The first word of each line of `kvod user list` is a user's name (bash only: the image has no awk).
    found=
    while read -r name _; do
        if [ "$name" = "$admin_user" ]; then found=1; fi
    done <<<"$users"
    if [ -n "$found" ]; then
        say "user '$admin_user' exists already in $data; KVOD_ADMIN_PASSWORD(_FILE) not applied"
    else
        if [ -n "${KVOD_ADMIN_PASSWORD_FILE:-}" ]; then
            [ -r "$KVOD_ADMIN_PASSWORD_FILE" ] ||
                die "cannot read KVOD_ADMIN_PASSWORD_FILE=$KVOD_ADMIN_PASSWORD_FILE (uid $EUID must be able to read it)"
            # $(<…) drops the file's trailing newline(s).
            admin_password=$(<"$KVOD_ADMIN_PASSWORD_FILE")
        else
            admin_password=${KVOD_ADMIN_PASSWORD:-}
        fi
        [ -n "$admin_password" ] ||
            die "KVOD_ADMIN_USER=$admin_user is set but there is no password: set KVOD_ADMIN_PASSWORD_FILE (a secret) or KVOD_ADMIN_PASSWORD"
        KVOD_PASSWORD=$admin_password kvod user add --data "$data" $init "$admin_user" '*=read,write,admin' >&2 ||
            die "could not add user '$admin_user' (see the line above)"
        unset admin_password
    fi
fi
unset KVOD_ADMIN_PASSWORD KVOD_PASSWORD

set -- --host 0.0.0.0 --port 7420 --http-port 7480 --http-host 0.0.0.0 --data "$data" "$@"
cert=${KVOD_TLS_CERT_FILE:-}
key=${KVOD_TLS_KEY_FILE:-}
if [ -n "$cert" ] || [ -n "$key" ]; then
    [ -n "$cert" ] && [ -n "$key" ] || die "set both KVOD_TLS_CERT_FILE and KVOD_TLS_KEY_FILE, or neither"
    for file in "$cert" "$key"; do
        [ -r "$file" ] || die "cannot read $file (uid $EUID must be able to read it)"
    done
    set -- "$@" --tls-port 7421 --tls-cert "$cert" --tls-key "$key"
fi

# Protected mode: one line of guidance ahead of kvod's own refusal. Skipped when the arguments decide the
# matter (--insecure-open, or --in-memory/--users, which keep users elsewhere).
case " $* " in
    *" --insecure-open "* | *" --in-memory "* | *" --users "* | *" --users="*) ;;
    *)
        # Only when the list could be read: kvod itself reports a data directory it cannot use.
        if users=$(kvod user list --data "$data" $init 2>/dev/null) && [ -z "$users" ]; then
            say "no users in $data: set KVOD_ADMIN_USER and KVOD_ADMIN_PASSWORD_FILE (or KVOD_ADMIN_PASSWORD) to create an admin on this start, or pass --insecure-open to serve without authentication"
        fi
        ;;
esac

exec kvod "$@"
