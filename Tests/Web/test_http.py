"""The HTTP listener itself: routes, methods and the limits http-parser does not enforce on its own."""
import socket

import pytest
from conftest import parse_response, read_until_closed


def raw_request(kvod, data):
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(data)
        return parse_response(read_until_closed(sock))


def test_health_and_readiness(kvod):
    assert kvod.http_get("/healthz")[:1] == (200,)
    status, headers, body = kvod.http_get("/readyz")
    assert status == 200 and body == b"ready\n" and headers["content-type"].startswith("text/plain")


def test_unknown_paths_and_methods(kvod):
    assert kvod.http_get("/nothing-here")[0] == 404
    status, headers, _ = raw_request(kvod, b"DELETE /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert status == 405 and headers["allow"] == "GET"


def test_keep_alive_serves_several_requests_on_one_connection(kvod):
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                     b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = read_until_closed(sock)
    assert data.count(b"HTTP/1.1 200 OK") == 3


@pytest.mark.parametrize("request_bytes, status", [
    (b"GET /" + b"a" * 3000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414),
    (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", 431),
    (b"GET / HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(100)) + b"\r\n", 431),
    (b"POST /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello", 413),
    (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 413),
    (b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
])
def test_limits_and_bodies_are_refused_with_a_status_and_a_close(kvod, request_bytes, status):
    assert raw_request(kvod, request_bytes)[0] == status
    kvod.assert_serving()


def test_a_header_flood_sent_byte_by_byte_is_refused(kvod):
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n")
        try:
            for _ in range(2000):
                sock.sendall(b"X-Flood: 0123456789\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = read_until_closed(sock)
    assert data.startswith(b"HTTP/1.1 431 ")
    kvod.assert_serving()


def test_connections_past_the_limit_get_503(kvod_factory):
    kvod = kvod_factory("--max-connections", "2")
    held = [socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) for _ in range(2)]
    try:
        with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert read_until_closed(sock).startswith(b"HTTP/1.1 503 ")
    finally:
        for sock in held:
            sock.close()


def test_kill_closes_a_kept_alive_http_connection_at_once(kvod):
    """`kill` (issue 42) of an HTTP connection (not upgraded, listed by `clients` as `http`): closed at once, without
    a JSON line it would not understand; kvod keeps serving. A listener has no connection id: `kill 0` is refused."""
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{kvod.http_port}\r\n\r\n".encode())
        first = b""
        while b"\r\n\r\nok" not in first:
            first += sock.recv(65536)
        http = [c for c in kvod.tcp_call({"op": "clients"})["clients"] if c["kind"] == "http"]
        assert len(http) == 1 and http[0]["user"] is None
        assert kvod.tcp_call({"op": "kill", "connection": http[0]["connection"]})["ok"] is True
        assert read_until_closed(sock) == b""
    refused = kvod.tcp_call({"op": "kill", "connection": 0})
    assert refused["error"]["code"] == "bad_request"
    kvod.assert_serving()
