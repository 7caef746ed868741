#!/bin/bash
# The kvod image's HEALTHCHECK (docker/Dockerfile, docker/compose.yaml): GET /healthz on kvod's HTTP
# listener inside the container, 127.0.0.1:7480 (the entrypoint's --http-port 7480 --http-host 0.0.0.0
# covers it), through bash's /dev/tcp: the image has no curl or wget, and needs none.
#
# Exit status 0 when kvod answers 200, 1 otherwise, with one line saying what went wrong (shown by
# `docker inspect --format '{{json .State.Health}}'`). /healthz never needs a token, with users or without;
# its Host is an IP address, which kvod's Host check always accepts. KVOD_HEALTHCHECK_PORT names another
# port when the container's arguments move the listener (--http-port); with --http-tls this plain-HTTP
# probe cannot work: check the TLS port from outside instead.
port=${KVOD_HEALTHCHECK_PORT:-7480}
if ! exec 3<>"/dev/tcp/127.0.0.1/$port"; then
    echo "kvod-healthcheck: cannot connect to 127.0.0.1:$port (is kvod running, with its HTTP listener on?)"
    exit 1
fi 2>/dev/null
printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nUser-Agent: kvod-healthcheck\r\nConnection: close\r\n\r\n' "$port" >&3
if ! IFS= read -r -t 4 status <&3; then
    echo "kvod-healthcheck: no answer from 127.0.0.1:$port within 4 s"
    exit 1
fi
status=${status%$'\r'}
case $status in
    'HTTP/1.1 200 '*) exit 0 ;;
esac
echo "kvod-healthcheck: GET /healthz on 127.0.0.1:$port answered '$status'"
exit 1
