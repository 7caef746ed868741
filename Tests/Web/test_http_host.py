"""Host and Origin checks of the HTTP listener (DNS rebinding, issue 24 item 4) and who may read /metrics
(item 10), with raw requests over real TCP: exactly the bytes a rebinding browser or a hostile client sends."""
import base64
import os
import re
import socket
import subprocess

import pytest
from conftest import KVOD_BIN, ROOT, parse_response

ASSETS = ROOT / "Sources" / "KVOServer" / "HTTP" / "Assets"
UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


def every_route():
    """(method, path, extra headers) for every route kvod has, and a 404 and a 405 one."""
    assets = ["/" if name == "index.html" else "/" + name for name in sorted(os.listdir(ASSETS))]
    routes = [("GET", path, {}) for path in assets + ["/metrics", "/healthz", "/readyz", "/no-such-path"]]
    return routes + [("GET", "/ws", UPGRADE), ("GET", "/ws", {}), ("DELETE", "/metrics", {}), ("OPTIONS", "*", {})]


def request(port, method="GET", path="/healthz", host=None, headers=None, version="1.1"):
    """One request on a fresh connection (Connection: close); `host` None sends no Host header, a list
    sends one Host line per item. Returns (status, headers, body)."""
    lines = [f"{method} {path} HTTP/{version}"]
    for value in ([] if host is None else host if isinstance(host, list) else [host]):
        lines.append(f"Host: {value}")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    lines.append("Connection: close")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        data = b""
        while not (data.startswith(b"HTTP/1.1 101 ") and b"\r\n\r\n" in data):  # an upgrade stays open
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
        return parse_response(data)


@pytest.mark.parametrize("method, path, headers", every_route())
def test_a_rebound_host_name_is_refused_on_every_route(kvod, method, path, headers):
    port = kvod.http_port
    status, response_headers, body = request(port, method, path, f"rebind.attacker.test:{port}", headers)
    assert status == 421, (path, status, body)
    assert b"--http-allowed-host" in body and b"rebind.attacker.test" in body
    assert response_headers["content-type"].startswith("text/plain")
    assert b"kvod_" not in body and b"<html" not in body.lower()
    # The same request with the server's own address is not refused for its Host.
    assert request(port, method, path, f"127.0.0.1:{port}", headers)[0] not in (400, 421)
    kvod.assert_serving()


def test_a_rebound_host_with_its_matching_origin_does_not_get_a_websocket(kvod):
    port = kvod.http_port
    status, _, body = request(port, "GET", "/ws", f"evil.example:{port}", {**UPGRADE, "Origin": f"http://evil.example:{port}"})
    assert status == 421, body


@pytest.mark.parametrize("host", [
    "127.0.0.1", "127.0.0.1:{port}", "localhost", "localhost:{port}", "LocalHost:{port}", "localhost.:{port}",
    "[::1]", "[::1]:{port}", "[0:0:0:0:0:0:0:1]:{port}", "127.0.0.1.:{port}",
    # Any IP literal: docker health checks and load balancers name the container's address; DNS rebinding needs a name.
    "10.1.2.3:{port}", "[2001:db8::7]:80", "0.0.0.0:{port}",
])
def test_addresses_and_localhost_are_accepted(kvod, host):
    assert request(kvod.http_port, host=host.format(port=kvod.http_port))[0] == 200


@pytest.mark.parametrize("host, status", [
    ("127.0.0.1.evil.example", 421), ("localhost.evil.example:{port}", 421), ("evil.example", 421),
    ("127.1:{port}", 421), ("0x7f.0.0.1:{port}", 421), ("localhost..", 421), ("sub.localhost:{port}", 421),
    ("a@127.0.0.1:{port}", 400), ("127.0.0.1:{port}@evil.example", 400), ("::1", 400), ("[::1", 400),
    ("[::1]x", 400), ("[fe80::1%25eth0]", 400), ("[not-an-address]", 400), ("127.0.0.1:", 400),
    ("127.0.0.1:99999", 400), ("127.0.0.1:8o", 400), ("127.0.0.1/x", 400), ("", 400),
    pytest.param("h" * 5000, 400, id="5000-byte-host"),
    ("evil.example%2e", 400), ("127.0.0.1 evil", 400),
])
def test_hostile_host_values_are_refused_and_kvod_keeps_serving(kvod, host, status):
    got, _, body = request(kvod.http_port, host=host.format(port=kvod.http_port))
    assert got == status, (host, got, body)
    assert len(body) < 600, "the refusal echoes at most a short, escaped part of the Host"
    kvod.assert_serving()


def test_a_missing_or_repeated_host_is_400(kvod):
    port = kvod.http_port
    status, _, body = request(port, host=None)
    assert status == 400 and b"Host" in body
    status, _, body = request(port, host=[f"127.0.0.1:{port}", "evil.example"])
    assert status == 400 and b"more than one Host" in body
    status, _, _ = request(port, host=[f"127.0.0.1:{port}", f"127.0.0.1:{port}"])
    assert status == 400
    # HTTP/1.0 may leave it out (browsers always send it).
    assert request(port, host=None, version="1.0")[0] == 200
    kvod.assert_serving()


def test_http_allowed_host_names_are_accepted(kvod_factory):
    kvod = kvod_factory("--http-allowed-host", "kvod.example.com", "--http-allowed-host", "Health.Internal.")
    port = kvod.http_port
    for host in ("kvod.example.com", f"KVOD.example.com:{port}", "kvod.example.com.", "health.internal:80"):
        assert request(port, host=host)[0] == 200, host
    for host in ("example.com", "evil.kvod.example.com", "kvod.example.com.evil"):
        assert request(port, host=host)[0] == 421, host
    # Its own origin for a WebSocket, on the listener's port.
    assert request(port, "GET", "/ws", f"kvod.example.com:{port}", {**UPGRADE, "Origin": f"http://kvod.example.com:{port}"})[0] == 101


@pytest.mark.parametrize("name", ["127.0.0.1", "kvod.example.com:80", "a@b", "", "*"])
def test_http_allowed_host_takes_names_only(name):
    result = subprocess.run([KVOD_BIN, "--in-memory", "--port", "0", "--http-port", "0", "--http-allowed-host", name],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "--http-allowed-host" in result.stderr, result.stderr


@pytest.mark.parametrize("origin, status", [
    ("http://127.0.0.1:{port}", 101), ("http://localhost:{port}", 101), ("http://[::1]:{port}", 101),
    ("http://LOCALHOST:{port}", 101),
    ("https://127.0.0.1:{port}", 403),  # https is not a plain listener's own origin
    ("http://127.0.0.1:{other}", 403),  # another service's page on loopback
    ("http://localhost", 403), ("http://127.0.0.1:{port}/", 403), ("http://a@127.0.0.1:{port}", 403),
    ("http://evil.example:{port}", 403), ("http://203.0.113.7:{port}", 403),  # an IP literal is not an origin of ours
    ("null", 403), ("ws://127.0.0.1:{port}", 403),
])
def test_the_listeners_own_origin(kvod, origin, status):
    port = kvod.http_port
    origin = origin.format(port=port, other=port + 1 if port < 65535 else port - 1)
    got, _, body = request(port, "GET", "/ws", f"127.0.0.1:{port}", {**UPGRADE, "Origin": origin})
    assert got == status, (origin, got, body)


def test_an_origin_equal_to_the_host_is_own_even_behind_a_port_mapping(kvod):
    # docker run -p 8080:PORT: the browser addresses 127.0.0.1:8080 and its page's origin says so.
    port = kvod.http_port
    assert request(port, "GET", "/ws", "127.0.0.1:8080", {**UPGRADE, "Origin": "http://127.0.0.1:8080"})[0] == 101
    assert request(port, "GET", "/ws", "127.0.0.1:8080", {**UPGRADE, "Origin": "http://127.0.0.1:8081"})[0] == 403
    # An IP literal Host is accepted, but a page from another address is not ours even on the same port.
    assert request(port, "GET", "/ws", f"10.9.9.9:{port}", {**UPGRADE, "Origin": f"http://10.9.9.8:{port}"})[0] == 403


def test_allowed_origins_still_work_and_do_not_lift_the_host_check(kvod_factory):
    kvod = kvod_factory("--http-allowed-origin", "https://app.example.com")
    port = kvod.http_port
    assert request(port, "GET", "/ws", f"127.0.0.1:{port}", {**UPGRADE, "Origin": "https://app.example.com"})[0] == 101
    assert request(port, "GET", "/ws", f"kvod.example.com:{port}", {**UPGRADE, "Origin": "https://app.example.com"})[0] == 421


# MARK: - /metrics and tokens (item 10)

def make_users(tmp_path):
    """A users file with a server admin and a reader, each with an API token; returns (file, admin token, reader token)."""
    users = tmp_path / "users.json"
    env = {"KVOD_PASSWORD": "correct horse battery"}
    tokens = []
    for name, rules in (("root", "*=read,write,admin"), ("reader", "*=read")):
        subprocess.run([KVOD_BIN, "user", "add", "--users", str(users), name, rules, "--hash-cost", "minimal"],
                       check=True, capture_output=True, env=env)
        output = subprocess.run([KVOD_BIN, "user", "token", "add", "--users", str(users), name],
                                check=True, capture_output=True, text=True).stdout
        tokens.append(re.search(r"kvod_[0-9a-f]{12}_[0-9a-f]{64}", output).group(0))
    return users, tokens[0], tokens[1]


def metrics(kvod, authorization=None):
    headers = {} if authorization is None else {"Authorization": authorization}
    return request(kvod.http_port, "GET", "/metrics", f"127.0.0.1:{kvod.http_port}", headers)


def test_metrics_on_a_non_loopback_listener_with_users_need_a_server_admins_token(kvod_factory, tmp_path):
    users, admin, reader = make_users(tmp_path)
    # 0.0.0.0 is not loopback (it is every interface); the test still connects through 127.0.0.1.
    kvod = kvod_factory("--users", str(users), "--http-host", "0.0.0.0")
    status, headers, body = metrics(kvod)
    assert status == 401 and headers["www-authenticate"].startswith("Bearer")
    assert b"kvod_objects" not in body and b"admin on *" in body
    status, headers, body = metrics(kvod, f"Bearer {admin}")
    assert status == 200 and b"kvod_objects" in body and b"kvod_revision" in body
    assert metrics(kvod, f"bearer   {admin}")[0] == 200  # the scheme is case-insensitive
    status, headers, body = metrics(kvod, f"Bearer {reader}")
    assert status == 403 and "insufficient_scope" in headers["www-authenticate"] and b"kvod_objects" not in body
    wrong = admin[:-4] + ("0000" if not admin.endswith("0000") else "1111")
    for value in (f"Bearer {wrong}", "Bearer kvod_nonsense", f"Basic {base64.b64encode(b'root:correct horse battery').decode()}",
                  "Bearer", f"Bearer {admin}, Bearer {admin}", f"Token {admin}"):
        status, headers, body = metrics(kvod, value)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer"), value
        assert b"kvod_objects" not in body
    # Health checks stay open; the token never shows in what kvod logs.
    assert request(kvod.http_port, host="127.0.0.1")[0] == 200
    kvod.assert_serving()
    assert admin not in kvod.stderr_path.read_text()


def test_metrics_stay_open_on_loopback_with_users_and_in_open_mode(kvod_factory, tmp_path):
    users, _, _ = make_users(tmp_path)
    with_users = kvod_factory("--users", str(users))  # --http-host 127.0.0.1
    status, _, body = metrics(with_users)
    assert status == 200 and b"kvod_objects" in body
    open_mode = kvod_factory("--http-host", "0.0.0.0", "--insecure-open")
    status, _, body = metrics(open_mode)
    assert status == 200 and b"kvod_objects" in body
