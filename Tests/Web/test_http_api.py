"""The HTTP API (/v1, issue 45, first part): objects read and written with plain HTTP against the real kvod, each route
mapped onto its JSON-lines request (so the operations table, the read check and the limits are the line's): ETag and
Kvod-Rev, If-Match / If-None-Match as conditions (412), errors as application/problem+json with kvod's code, Bearer
tokens, the Origin check, keep-alive and pipelining, and hostile input (malformed JSON, injection through the body,
bad percent-encoding, bodies past --max-line, chunked bodies, unknown query parameters).
"""
import json
import re
import socket
import subprocess

from conftest import KVOD_BIN, parse_response, read_until_closed


def call(kvod, method, path, body=None, headers=None, raw_body=None):
    """One request on its own connection (Connection: close); returns (status, headers, parsed JSON body or None)."""
    data = raw_body if raw_body is not None else (b"" if body is None else json.dumps(body).encode())
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{kvod.http_port}", "Connection: close"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if data or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(data)}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + data
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(request)
        status, response_headers, response_body = parse_response(read_until_closed(sock))
    parsed = json.loads(response_body) if response_body.strip() else None
    return status, response_headers, parsed


def test_objects_are_created_read_written_and_deleted_with_revisions_and_etags(kvod):
    status, headers, body = call(kvod, "POST", "/v1/objects/users%3Aada", {"name": "Ada", "address": {"city": "London"}})
    assert (status, body) == (201, {"rev": 1}) and headers["kvod-rev"] == "1"
    status, headers, body = call(kvod, "GET", "/v1/objects/users%3Aada")
    assert status == 200 and body == {"name": "Ada", "address": {"city": "London"}}
    assert headers["etag"] == '"1"' and headers["content-type"] == "application/json"
    status, headers, body = call(kvod, "GET", "/v1/objects/users%3Aada/address.city")
    assert (status, body) == (200, "London")
    # Values as clients write them: keys in any order, floats, escapes; read back as the line protocol reads them.
    value = {"z": 1.5, "a": "caf\u00e9 \"quoted\"", "m": [1, {"y": None, "b": True}]}
    status, _, body = call(kvod, "PUT", "/v1/objects/users%3Aada/profile", value)
    assert (status, body) == (200, {"rev": 2})
    assert call(kvod, "GET", "/v1/objects/users%3Aada/profile")[2] == value
    assert kvod.tcp_call({"op": "get", "object": "users:ada", "keyPath": "profile"})["value"] == value
    status, _, body = call(kvod, "POST", "/v1/objects/users%3Aada/logins:increment", {"by": 2})
    assert (status, body) == (200, {"rev": 3, "value": 2})
    status, _, body = call(kvod, "POST", "/v1/batch", {"ops": [
        {"op": "set", "object": "users:ada", "keyPath": "address.city", "value": "Paris"},
        {"op": "create", "object": "users:bob"}]})
    assert (status, body) == (200, {"rev": 4, "results": [{}, {}]})
    status, headers, _ = call(kvod, "HEAD", "/v1/objects/users%3Aada")
    assert status == 200 and headers["etag"] == '"4"' and headers["kvod-rev"] == "4"
    assert call(kvod, "DELETE", "/v1/objects/users%3Abob")[:3:2] == (200, {"rev": 5})
    status, headers, problem = call(kvod, "GET", "/v1/objects/users%3Abob")
    assert status == 404 and headers["content-type"] == "application/problem+json"
    assert problem["code"] == "not_found" and problem["status"] == 404 and problem["title"] == "Not Found"
    assert "users:bob" in problem["detail"]
    kvod.assert_serving()


def test_conditions_are_http_preconditions(kvod):
    call(kvod, "POST", "/v1/objects/doc", {"n": 0})
    etag = call(kvod, "GET", "/v1/objects/doc")[1]["etag"]
    assert call(kvod, "PUT", "/v1/objects/doc/n", 1, {"If-Match": etag})[0] == 200
    # The same tag again: the object changed after it.
    status, _, problem = call(kvod, "PUT", "/v1/objects/doc/n", 2, {"If-Match": etag})
    assert status == 412 and problem["code"] == "conflict" and problem["condition"] == "ifRev", problem
    assert call(kvod, "GET", "/v1/objects/doc/n")[2] == 1
    # If-None-Match: * creates only what does not exist; without it an existing object is a plain 409.
    status, _, problem = call(kvod, "POST", "/v1/objects/doc", {}, {"If-None-Match": "*"})
    assert status == 412 and problem["condition"] == "ifAbsent"
    assert call(kvod, "POST", "/v1/objects/doc", {})[0] == 409
    assert call(kvod, "DELETE", "/v1/objects/doc", headers={"If-Match": '"1"'})[0] == 412
    # A precondition kvod cannot check is refused, never ignored: nothing is written.
    for header in ({"If-Match": "W/\"2\""}, {"If-Match": "2"}, {"If-None-Match": '"2"'}):
        status, _, problem = call(kvod, "PUT", "/v1/objects/doc/n", 9, header)
        assert status == 400 and problem["code"] == "bad_request", (header, problem)
    assert call(kvod, "GET", "/v1/objects/doc/n")[2] == 1


def test_hostile_requests_get_a_problem_and_change_nothing(kvod):
    call(kvod, "POST", "/v1/objects/o", {"n": 1})
    cases = [
        # A body that would add fields to the request line if it were pasted in: it is not one JSON value.
        ("PUT", "/v1/objects/o/n", b'1,"op":"delete"', 400),
        ("PUT", "/v1/objects/o/n", b'{"a":[[[', 400),
        ("PUT", "/v1/objects/o/n", b"", 400),
        ("PUT", "/v1/objects/o/n", b"[" * 100_000 + b"]" * 100_000, 400),
        ("POST", "/v1/objects/o2", b'[1]', 400),
        ("POST", "/v1/batch", b'{"op":"delete","ops":[]}', 400),
        ("POST", "/v1/objects/o/n:increment", b'{"by":1,"object":"other"}', 400),
        ("PUT", "/v1/objects/o%ZZ/n", b"1", 400),
        ("PUT", "/v1/objects/o%FF/n", b"1", 400),
        ("GET", "/v1/objects/o?sinceRev=1", b"", 400),
        ("GET", "/v1/objects/o?atLeastRev=1&atLeastRev=2", b"", 400),
        ("PATCH", "/v1/objects/o", b"{}", 405),
        ("GET", "/v1/nothing", b"", 404),
        ("PUT", "/v1/objects/o/", b"1", 400),
    ]
    for method, path, body, expected in cases:
        status, headers, problem = call(kvod, method, path, raw_body=body)
        assert status == expected, (method, path, body[:40], status, problem)
        assert headers["content-type"] == "application/problem+json" and problem["status"] == expected
    assert call(kvod, "GET", "/v1/objects/o")[2] == {"n": 1}
    assert kvod.tcp_call({"op": "get", "object": "o2"})["error"]["code"] == "not_found"
    kvod.assert_serving()


def test_bodies_are_bounded_by_max_line_and_need_a_length(kvod_factory):
    kvod = kvod_factory("--max-line", "4096")
    status, _, _ = call(kvod, "PUT", "/v1/objects/o/n", raw_body=b'"' + b"x" * 5000 + b'"')
    assert status == 413
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(b"PUT /v1/objects/o/n HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n1\r\n0\r\n\r\n")
        assert parse_response(read_until_closed(sock))[0] == 411
    # Other routes still take no body at all.
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\n\r\nx")
        assert parse_response(read_until_closed(sock))[0] == 413
    kvod.assert_serving()


def test_keep_alive_and_pipelined_requests_are_answered_in_order(kvod):
    call(kvod, "POST", "/v1/objects/p", {"n": 0})
    requests = b""
    for n in range(1, 4):
        requests += (f"PUT /v1/objects/p/n HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(str(n))}\r\n\r\n{n}").encode()
    requests += b"GET /v1/objects/p/n HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /v1/objects/missing HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall(requests)
        data = read_until_closed(sock)
    statuses = [int(match) for match in re.findall(rb"HTTP/1\.1 (\d{3})", data)]
    assert statuses == [200, 200, 200, 200, 404], data
    assert b'{"rev":4}' in data and data.index(b'{"rev":2}') < data.index(b'{"rev":4}')


def test_bearer_tokens_and_the_read_check(kvod_factory, tmp_path):
    users = tmp_path / "users.json"
    tokens = {}
    for name, rules in (("root", "*=read,write,admin"), ("writer", "inbox=write")):
        subprocess.run([KVOD_BIN, "user", "add", "--users", str(users), name, rules, "--hash-cost", "minimal"],
                       check=True, capture_output=True, env={"KVOD_PASSWORD": "correct horse battery"})
        output = subprocess.run([KVOD_BIN, "user", "token", "add", "--users", str(users), name],
                                check=True, capture_output=True, text=True).stdout
        tokens[name] = re.search(r"kvod_[0-9a-f]{12}_[0-9a-f]{64}", output).group(0)
    kvod = kvod_factory("--users", str(users))
    root = {"Authorization": f"Bearer {tokens['root']}"}
    writer = {"Authorization": f"Bearer {tokens['writer']}"}
    status, headers, problem = call(kvod, "GET", "/v1/objects/inbox")
    assert status == 401 and problem["code"] == "unauthenticated" and headers["www-authenticate"].startswith("Bearer")
    status, headers, problem = call(kvod, "GET", "/v1/objects/inbox", headers={"Authorization": "Bearer kvod_nope"})
    assert status == 401 and "invalid_token" in headers["www-authenticate"]
    assert call(kvod, "POST", "/v1/objects/inbox", {"secret": "s3"}, root)[0] == 201
    # A write-only user may write and is told nothing of what the object holds.
    assert call(kvod, "PUT", "/v1/objects/inbox/note", "hi", writer)[0] == 200
    status, _, problem = call(kvod, "GET", "/v1/objects/inbox", headers=writer)
    assert status == 403 and problem["code"] == "forbidden" and "s3" not in json.dumps(problem)
    # A condition reads the object: a write-only user's is refused for want of read, and says nothing of the value.
    status, _, problem = call(kvod, "PUT", "/v1/objects/inbox/note", "x", {**writer, "If-Match": '"1"'})
    assert status == 403 and problem["permission"] == "read", problem
    assert "s3" not in json.dumps(problem) and '"hi"' not in json.dumps(problem)
    # Streams pass the same door: no token is 401, a user without read is 403, a reader streams.
    assert EventStream(kvod, "/v1/objects/inbox/note").status == 401
    assert EventStream(kvod, "/v1/objects/inbox/note", writer).status == 403
    reading = EventStream(kvod, "/v1/objects/inbox/note?options=initial,new", root)
    assert reading.status == 200 and reading.next_blocks(1)[0][0]["change"]["new"] == "hi"
    reading.close()
    # Each request says who it is from: a keep-alive connection's earlier token does not carry over.
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall((f"GET /v1/objects/inbox/note HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {tokens['root']}\r\n\r\n"
                      "GET /v1/objects/inbox/note HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").encode())
        statuses = [int(match) for match in re.findall(rb"HTTP/1\.1 (\d{3})", read_until_closed(sock))]
    assert statuses == [200, 401]
    # Nor into a WebSocket: a connection that carried API requests is not upgraded (it would act for their token).
    with socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10) as sock:
        sock.sendall((f"GET /v1/objects/inbox/note HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {tokens['root']}\r\n\r\n"
                      "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        statuses = [int(match) for match in re.findall(rb"HTTP/1\.1 (\d{3})", read_until_closed(sock))]
    assert statuses == [200, 400]


def test_a_page_of_another_origin_cannot_write_to_a_loopback_kvod(kvod):
    status, _, problem = call(kvod, "POST", "/v1/objects/csrf", {}, {"Origin": "http://evil.example", "Content-Type": "text/plain"})
    assert status == 403 and problem["code"] == "forbidden"
    assert call(kvod, "GET", "/v1/objects/csrf")[0] == 404
    assert call(kvod, "POST", "/v1/objects/csrf", {}, {"Origin": f"http://127.0.0.1:{kvod.http_port}"})[0] == 201


# MARK: - Server-Sent Events

class EventStream:
    """A raw SSE stream over a socket: the response head, then events parsed as an EventSource parses them."""

    def __init__(self, kvod, path, headers=None):
        self.sock = socket.create_connection(("127.0.0.1", kvod.http_port), timeout=10)
        lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{kvod.http_port}", "Accept: text/event-stream"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            assert chunk, f"closed before the head: {self.buffer!r}"
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1])
        self.head = head.decode("latin-1")
        self.comments = []

    def next_blocks(self, count, timeout=10):
        """The next `count` dispatched events as (data as JSON, id or None)."""
        self.sock.settimeout(timeout)
        events = []
        while len(events) < count:
            while b"\n\n" not in self.buffer:
                chunk = self.sock.recv(65536)
                assert chunk, f"stream closed after {events}"
                self.buffer += chunk
            block, _, self.buffer = self.buffer.partition(b"\n\n")
            data, event_id = None, None
            for line in block.decode().split("\n"):
                if line.startswith(":"):
                    self.comments.append(line)
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                elif line.startswith("id: "):
                    event_id = int(line[4:])
            if data is not None:
                events.append((data, event_id))
        return events

    def close(self):
        self.sock.close()


def test_an_event_stream_sends_changes_as_sse_with_the_revision_as_id(kvod):
    call(kvod, "POST", "/v1/objects/clock", {"date": "2026-11-30"})
    stream = EventStream(kvod, "/v1/objects/clock/date?options=initial,new,old")
    assert stream.status == 200 and "Content-Type: text/event-stream" in stream.head
    [(initial, first_id)] = stream.next_blocks(1)
    assert (initial["reason"], initial["change"]["new"], first_id) == ("initial", "2026-11-30", 1)
    call(kvod, "PUT", "/v1/objects/clock/date", "2026-12-01")
    [(change, change_id)] = stream.next_blocks(1)
    assert (change["change"]["old"], change["change"]["new"], change["rev"], change_id) == ("2026-11-30", "2026-12-01", 2, 2)
    # The event is the TCP event, in full form.
    assert change["event"] == "change" and change["keyPath"] == "date" and change["object"] == "clock"
    stream.close()
    kvod.assert_serving()


def test_several_events_of_one_revision_carry_its_id_on_the_last_only_and_resume_is_exactly_once(kvod):
    stream = EventStream(kvod, "/v1/observe?pattern=room%3A*")
    status, _, body = call(kvod, "POST", "/v1/batch", {"ops": [{"op": "create", "object": "room:1"}, {"op": "create", "object": "room:2"}]})
    revision = body["rev"]
    events = stream.next_blocks(2)
    assert [(event["object"], event_id) for event, event_id in events] == [("room:1", None), ("room:2", revision)]
    stream.close()
    # Away: two more revisions; back with Last-Event-ID, each arrives once, in order, nothing before.
    call(kvod, "POST", "/v1/objects/room%3A3", {})
    call(kvod, "DELETE", "/v1/objects/room%3A1")
    back = EventStream(kvod, "/v1/observe?pattern=room%3A*", {"Last-Event-ID": str(revision)})
    events = back.next_blocks(2)
    assert [(event["reason"], event["object"], event_id) for event, event_id in events] == [
        ("created", "room:3", revision + 1), ("sourceDeleted", "room:1", revision + 2)]
    back.close()
    # A resume from before what history holds is a resync, as on TCP (here history holds it all: same answer).
    again = EventStream(kvod, f"/v1/observe?pattern=room%3A*&sinceRev={revision}")
    assert len(again.next_blocks(2)) == 2
    again.close()


def test_stream_refusals_and_hostile_streams(kvod_factory):
    kvod = kvod_factory("--max-output-buffer", "262144")
    call(kvod, "POST", "/v1/objects/o", {"n": 0})
    for path, headers, expected in [
        ("/v1/objects/missing/n", {}, 404),
        ("/v1/objects/o", {}, 400),  # no key path
        ("/v1/objects/o/n?options=new,bogus", {}, 400),
        ("/v1/objects/o/n?sinceRev=1", {"Last-Event-ID": "1"}, 400),
        ("/v1/objects/o/n", {"Last-Event-ID": "x"}, 400),
        ("/v1/observe", {}, 400),
        ("/v1/observe?pattern=o&where=(((", {}, 400),
    ]:
        stream = EventStream(kvod, path, headers)
        assert stream.status == expected, (path, headers, stream.status, stream.buffer)
        stream.close()
    # Many streams at once, and one that never reads while the object changes: it is cut at the output limit
    # (a slow consumer, as on TCP), the others and the server go on.
    streams = [EventStream(kvod, "/v1/objects/o/n") for _ in range(20)]
    slow = EventStream(kvod, "/v1/objects/o/n")
    big = "x" * 32_000
    for n in range(200):  # 6.4 MB for each stream: more than the socket buffers and the 256 KiB output limit hold
        call(kvod, "PUT", "/v1/objects/o/n", f"{n} {big}")
        if n % 20 == 19:
            for stream in streams:
                stream.next_blocks(20)
    for stream in streams:
        stream.close()
    slow.sock.settimeout(10)
    received = b""
    while True:
        try:
            chunk = slow.sock.recv(1 << 20)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += chunk
    assert received.count(b"event: change") < 200, "the slow stream was cut, not given everything"
    kvod.assert_serving()


def test_stream_tickets_stand_for_a_token_once(kvod_factory, tmp_path):
    users = tmp_path / "users.json"
    subprocess.run([KVOD_BIN, "user", "add", "--users", str(users), "ann", "*=read,write", "--hash-cost", "minimal"],
                   check=True, capture_output=True, env={"KVOD_PASSWORD": "correct horse battery"})
    output = subprocess.run([KVOD_BIN, "user", "token", "add", "--users", str(users), "ann"], check=True, capture_output=True, text=True).stdout
    token = re.search(r"kvod_[0-9a-f]{12}_[0-9a-f]{64}", output).group(0)
    kvod = kvod_factory("--users", str(users))
    bearer = {"Authorization": f"Bearer {token}"}
    call(kvod, "POST", "/v1/objects/o", {"n": 1}, bearer)
    assert call(kvod, "POST", "/v1/tickets")[0] == 401
    status, _, body = call(kvod, "POST", "/v1/tickets", headers=bearer)
    assert status == 201 and body["expiresIn"] == 30 and body["ticket"].startswith("kvodt_"), body
    ticket = body["ticket"]
    stream = EventStream(kvod, f"/v1/objects/o/n?options=initial,new&ticket={ticket}")
    assert stream.status == 200 and stream.next_blocks(1)[0][0]["change"]["new"] == 1
    stream.close()
    # Used up; an unknown one, a ticket on a non-stream route, a ticket beside a token: refused.
    assert EventStream(kvod, f"/v1/objects/o/n?ticket={ticket}").status == 401
    assert EventStream(kvod, "/v1/objects/o/n?ticket=kvodt_00").status == 401
    assert call(kvod, "GET", f"/v1/objects/o?ticket={ticket}", headers=bearer)[0] == 400
    second = call(kvod, "POST", "/v1/tickets", headers=bearer)[2]["ticket"]
    assert EventStream(kvod, f"/v1/objects/o/n?ticket={second}", bearer).status == 400
    # Bounded per user: 100 outstanding, then 429 until some are used or expire.
    statuses = [call(kvod, "POST", "/v1/tickets", headers=bearer)[0] for _ in range(100)]
    assert statuses.count(201) == 99 and statuses[-1] == 429, statuses  # the second ticket is still outstanding
    kvod.assert_serving()


def test_cors_for_an_allowed_origin_and_its_preflight(kvod_factory):
    kvod = kvod_factory("--http-allowed-origin", "https://app.example")
    origin = {"Origin": "https://app.example"}
    status, headers, _ = call(kvod, "OPTIONS", "/v1/objects/o/n", headers={**origin, "Access-Control-Request-Method": "PUT"})
    assert status == 204 and headers["access-control-allow-origin"] == "https://app.example"
    assert "PUT" in headers["access-control-allow-methods"] and "If-Match" in headers["access-control-allow-headers"]
    status, headers, _ = call(kvod, "POST", "/v1/objects/o", {"n": 1}, origin)
    assert status == 201 and headers["access-control-allow-origin"] == "https://app.example" and "ETag" in headers["access-control-expose-headers"]
    status, headers, _ = call(kvod, "GET", "/v1/objects/missing", headers=origin)
    assert status == 404 and headers["access-control-allow-origin"] == "https://app.example"
    # Another origin: refused, no CORS headers; no Origin (a program): none needed.
    status, headers, _ = call(kvod, "OPTIONS", "/v1/objects/o/n", headers={"Origin": "https://other.example"})
    assert status == 403 and "access-control-allow-origin" not in headers
    assert "access-control-allow-origin" not in call(kvod, "GET", "/v1/objects/o")[1]


def test_the_openapi_document_is_valid_and_matches_the_routes(kvod):
    """GET /v1/openapi.json is a valid OpenAPI 3.1 document, and on each documented path the server answers exactly
    the documented methods (any other is 405), so no route is undocumented and no documented route is missing."""
    from openapi_spec_validator import validate
    status, headers, document = call(kvod, "GET", "/v1/openapi.json")
    assert status == 200 and headers["content-type"] == "application/json"
    validate(document)
    methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
    bodies = {"POST": b"{}", "PUT": b"1"}
    for template, operations in document["paths"].items():
        documented = {method.upper() for method in operations if method.upper() in methods}
        for method in methods:
            call(kvod, "PUT", "/v1/objects/o/n", 1) if call(kvod, "GET", "/v1/objects/o")[0] == 200 else call(kvod, "POST", "/v1/objects/o", {"n": 1})
            path = template.replace("{id}", "o").replace("{keyPath}", "n:increment" if method == "POST" else "n")
            if template == "/v1/observe":
                path += "?pattern=o"
            status, _, body = call(kvod, method, path, raw_body=bodies.get(method, b""),
                                   headers={"Accept": "text/event-stream"} if template == "/v1/observe" and method == "GET" else None) \
                if not (template == "/v1/observe" and method == "GET") else (EventStream(kvod, path).status, None, None)
            served = status not in (404, 405) or (status == 404 and body is not None and "no HTTP API route" not in body.get("detail", ""))
            assert served == (method in documented), (method, path, status, body)
    assert call(kvod, "GET", "/v1/undocumented")[0] == 404
