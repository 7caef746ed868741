#!/bin/sh
# Makes a throwaway certificate authority and a server certificate for localhost and 127.0.0.1 with the
# openssl CLI, for trying kvod's TLS (docker/compose.yaml, README "Secure deployment"). Not for production.
#
#     scripts/make-dev-certs.sh DIR
#
# writes into DIR (created if missing):
#   ca.pem       the CA certificate: give it to clients (kvoclient --tls --cacert DIR/ca.pem)
#   ca.key       the CA's key (mode 0600; nothing else needs it, delete it when done)
#   server.pem   the server certificate (CN and subjectAltName localhost, 127.0.0.1, ::1), signed by the CA
#   server.key   its unencrypted key, mode 0644 so that the container's user (uid 7420) can read it when
#                DIR is mounted or used as a compose secret; a real key should be mode 0600, owned by 7420
# Valid for 30 days. Existing files in DIR are overwritten. Nothing here belongs in git.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1
command -v openssl >/dev/null 2>&1 || { echo "$0: needs the openssl command (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj "/CN=kvod throwaway dev CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
printf '%s\n' 'subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1' \
    'basicConstraints = CA:FALSE' 'keyUsage = digitalSignature' 'extendedKeyUsage = serverAuth' >"$dir/server.ext"
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 30 -extfile "$dir/server.ext" -out "$dir/server.pem" 2>/dev/null
rm -f "$dir/server.csr" "$dir/server.ext" "$dir/ca.srl"
chmod 0644 "$dir/ca.pem" "$dir/server.pem" "$dir/server.key"
openssl verify -CAfile "$dir/ca.pem" "$dir/server.pem" >/dev/null
echo "made $dir/ca.pem, $dir/server.pem and $dir/server.key (localhost, 127.0.0.1, ::1; 30 days)"
