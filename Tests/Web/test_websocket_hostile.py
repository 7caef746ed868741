"""What an attacker would send to /ws, frame by frame through a raw socket: each gets RFC 6455's answer
(a close frame with the right code, then the TCP close), nothing is allocated for a lying length, and kvod
keeps serving everyone else."""
import json
import socket
import time

import pytest
from wsraw import RawWebSocket


def upgraded(kvod, **kwargs):
    ws = RawWebSocket(kvod.http_port, **kwargs)
    assert ws.status == 101
    return ws


@pytest.mark.parametrize("case, send, expected_code", [
    ("unmasked client frame", lambda ws: ws.send_frame(0x1, b'{"op":"ping"}', mask=False), 1002),
    ("reserved bit set", lambda ws: ws.send_frame(0x1, b'{"op":"ping"}', rsv=0b100), 1002),
    ("control frame over 125 bytes", lambda ws: ws.send_frame(0x9, b"p" * 126), 1002),
    ("fragmented control frame", lambda ws: ws.send_frame(0x9, b"ping", fin=False), 1002),
    ("continuation with nothing to continue", lambda ws: ws.send_frame(0x0, b"x"), 1002),
    ("unknown opcode", lambda ws: ws.send_frame(0x3, b"x"), 1002),
    ("invalid UTF-8 in a text frame", lambda ws: ws.send_frame(0x1, b'{"op":"\xff\xfe"}'), 1007),
    ("binary frame", lambda ws: ws.send_frame(0x2, b"\x00\x01"), 1003),
])
def test_protocol_violations_get_their_close_codes(kvod, case, send, expected_code):
    ws = upgraded(kvod)
    send(ws)
    assert ws.read_close_code() == expected_code, case
    assert ws.is_closed_by_server(), case
    kvod.assert_serving()


def test_a_one_gibibyte_length_header_is_refused_without_allocating_it(kvod):
    before = resident_bytes(kvod)
    ws = upgraded(kvod)
    ws.send_frame(0x1, b"{", length=1 << 30)  # claims 1 GiB, sends one byte
    assert ws.read_close_code() == 1009
    assert ws.is_closed_by_server()
    assert resident_bytes(kvod) < before + 64 * 1024 * 1024
    kvod.assert_serving()


def test_a_message_over_the_request_limit_is_closed_with_1009(kvod_factory):
    kvod = kvod_factory("--max-line", "4096")
    ws = upgraded(kvod)
    ws.send_text(json.dumps({"op": "create", "object": "big", "values": {"x": "y" * 5000}}))
    assert ws.read_close_code() == 1009
    ok = upgraded(kvod)
    ok.send_text(json.dumps({"op": "create", "id": 1, "object": "small", "values": {"x": "y" * 1000}}))
    assert json.loads(ok.read_frame()[2])["ok"] is True


def test_a_message_split_into_many_tiny_fragments_still_counts_against_the_limit(kvod_factory):
    kvod = kvod_factory("--max-line", "4096")
    ws = upgraded(kvod)
    frames = RawWebSocket.frame(0x1, b"[", fin=False)
    frames += b"".join(RawWebSocket.frame(0x0, b"1", fin=False) for _ in range(4200))
    ws.sock.sendall(frames)  # 4,201 bytes in one-byte frames, past the 4,096 limit, in one go
    assert ws.read_close_code() == 1009
    kvod.assert_serving()


def test_garbage_instead_of_an_upgrade_gets_400_and_a_close(kvod):
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(b"\x00\x01\x02 this is not HTTP\r\n\r\n")
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    assert data.startswith(b"HTTP/1.1 400 ")
    kvod.assert_serving()


def test_a_json_line_on_the_http_port_is_refused(kvod):
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(b'{"op":"ping"}\n')
        data = sock.recv(4096)
    assert data.startswith(b"HTTP/1.1 400 ")


@pytest.mark.parametrize("headers, status", [
    ({"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}, 400),  # no key
    ({"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
      "Sec-WebSocket-Version": "8"}, 426),
    ({}, 426),  # a plain GET of /ws
])
def test_bad_handshakes_are_refused(kvod, headers, status):
    assert kvod.http_get("/ws", headers)[0] == status


def test_the_rfc_example_key_gets_the_rfc_accept_value(kvod):
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        data = sock.recv(4096)
    assert data.startswith(b"HTTP/1.1 101 ")
    assert b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" in data


def test_origins_are_checked_against_the_allowed_list(kvod_factory):
    kvod = kvod_factory("--http-allowed-origin", "https://app.example.com")
    refused = RawWebSocket(kvod.http_port, headers={"Origin": "https://evil.example.net"})
    assert refused.status == 403
    allowed = RawWebSocket(kvod.http_port, headers={"Origin": "https://app.example.com"})
    assert allowed.status == 101
    own = RawWebSocket(kvod.http_port, headers={"Origin": f"http://127.0.0.1:{kvod.http_port}"})
    assert own.status == 101
    no_origin = RawWebSocket(kvod.http_port)
    assert no_origin.status == 101


def test_a_slow_websocket_consumer_is_closed_and_everyone_else_is_served(kvod_factory):
    kvod = kvod_factory("--max-output-buffer", str(256 * 1024))
    slow = upgraded(kvod)
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.send_text(json.dumps({"op": "create", "object": "feed", "values": {"v": ""}}))
    slow.send_text(json.dumps({"op": "observe", "object": "feed", "keyPath": "v", "options": ["new", "old"]}))
    # The writer starts once kvod has the observation (its info says so), not after a while.
    deadline = time.time() + 10
    while time.time() < deadline and not kvod.tcp_call({"op": "info", "object": "feed"}).get("observers"):
        time.sleep(0.02)
    assert len(kvod.tcp_call({"op": "info", "object": "feed"})["observers"]) == 1
    writer = upgraded(kvod)
    for i in range(400):  # 400 events of ~16 KB to a reader that never reads: far past 256 KiB
        writer.send_text(json.dumps({"op": "set", "object": "feed", "keyPath": "v", "value": str(i) * 8000}))
    replies = [json.loads(writer.read_frame()[2]) for _ in range(400)]
    assert all(reply["ok"] for reply in replies)
    # Closed on kvod's side (the kernel still trickles what it had queued through the 4 KiB window, so the
    # slow socket would see the end only much later): the metrics say so.
    deadline = time.time() + 15
    while time.time() < deadline and metric(kvod, 'kvod_slow_consumer_disconnects_total{limit="connection"}') < 1:
        time.sleep(0.1)
    assert metric(kvod, 'kvod_slow_consumer_disconnects_total{limit="connection"}') == 1
    assert metric(kvod, 'kvod_connections{transport="websocket"}') == 1  # the writer
    slow.close()
    kvod.assert_serving()


def test_a_client_that_stops_mid_request_head_is_closed_at_the_first_request_timeout(kvod_factory):
    kvod = kvod_factory("--first-request-timeout", "1")
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        started = time.time()
        assert sock.recv(4096) == b""  # closed, nothing answered
        assert time.time() - started < 8
    kvod.assert_serving()


def metric(kvod, series):
    """The value of one series (name with its labels, as rendered) in GET /metrics."""
    status, _, body = kvod.http_get("/metrics")
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {series} in /metrics")


def resident_bytes(kvod):
    return metric(kvod, "process_resident_memory_bytes")
