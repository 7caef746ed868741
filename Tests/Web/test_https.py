"""The HTTP listener over TLS (--http-tls, with the TLS listener's certificate): https:// and wss://."""
import asyncio
import json
import socket
import ssl
import subprocess

import pytest
from websockets.asyncio.client import connect


@pytest.fixture
def certificate(tmp_path):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem"), "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return tmp_path / "cert.pem", tmp_path / "key.pem"


def test_https_and_wss_with_the_tls_listeners_certificate(kvod_factory, certificate):
    cert, key = certificate
    kvod = kvod_factory("--tls-port", "0", "--tls-cert", str(cert), "--tls-key", str(key), "--http-tls")
    context = ssl.create_default_context(cafile=str(cert))
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK") and data.endswith(b"ok\n")

    async def scenario():
        async with connect(f"wss://127.0.0.1:{kvod.http_port}/ws", ssl=context) as ws:
            await ws.send(json.dumps({"op": "create", "id": 1, "object": "secure", "values": {"v": 1}}))
            assert json.loads(await ws.recv()) == {"id": 1, "ok": True, "rev": 1}
            await ws.send(json.dumps({"op": "observe", "id": 2, "object": "secure", "keyPath": "v", "options": ["new"]}))
            await ws.recv()
            await ws.send(json.dumps({"op": "set", "id": 3, "object": "secure", "keyPath": "v", "value": "x" * 40000}))
            messages = [json.loads(await ws.recv()) for _ in range(2)]
            assert any(m.get("event") == "change" and m["change"]["new"] == "x" * 40000 for m in messages)
    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_plain_http_on_the_tls_http_port_is_closed(kvod_factory, certificate):
    cert, key = certificate
    kvod = kvod_factory("--tls-port", "0", "--tls-cert", str(cert), "--tls-key", str(key), "--http-tls")
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        data = b""
        try:
            while chunk := sock.recv(4096):
                data += chunk
        except ConnectionResetError:
            pass
    assert not data.startswith(b"HTTP/1.1 200")
    assert kvod.tcp_call({"op": "ping", "id": "alive"})["ok"] is True


def test_http_tls_without_a_tls_listener_is_refused_at_start(tmp_path):
    from conftest import KVOD_BIN
    result = subprocess.run([KVOD_BIN, "--in-memory", "--port", "0", "--http-port", "0", "--http-tls"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "--http-tls needs --tls-port" in result.stderr
