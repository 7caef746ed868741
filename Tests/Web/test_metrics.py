"""GET /metrics, read by the Prometheus project's own parser (prometheus_client), checked against the
activity the test caused."""
import asyncio
import json
import os
import re
import socket

from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import connect


def scrape(kvod):
    status, headers, body = kvod.http_get("/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0)


def test_metrics_count_what_clients_did(kvod_factory, tmp_path):
    kvod = kvod_factory("--data", str(tmp_path / "data"), "--sync", "normal")
    kvod.tcp_call({"op": "create", "object": "m", "values": {"v": 0}})
    for i in range(5):
        kvod.tcp_call({"op": "set", "object": "m", "keyPath": "v", "value": i + 1})
    kvod.tcp_call({"op": "get", "object": "missing"})
    kvod.tcp_call({"op": "no-such-op"})

    async def websocket_activity():
        async with connect(kvod.ws_url) as watcher, connect(kvod.ws_url) as writer:
            await watcher.send(json.dumps({"op": "observe", "id": 1, "object": "m", "keyPath": "v", "options": ["new"]}))
            await watcher.recv()
            for i in range(3):
                await writer.send(json.dumps({"op": "set", "id": i, "object": "m", "keyPath": "v", "value": 100 + i}))
                await writer.recv()
                await watcher.recv()
            samples = scrape(kvod)
            assert value(samples, "kvod_connections", transport="websocket") == 2
            assert value(samples, "kvod_observations") == 1
            return samples

    during = asyncio.run(asyncio.wait_for(websocket_activity(), 30))
    assert value(during, "kvod_requests_total", op="set", outcome="ok") == 8
    assert value(during, "kvod_requests_total", op="create", outcome="ok") == 1
    assert value(during, "kvod_requests_total", op="get", outcome="not_found") == 1
    assert value(during, "kvod_requests_total", op="invalid", outcome="unknown_op") == 1
    assert value(during, "kvod_requests_total", op="observe", outcome="ok") == 1
    assert value(during, "kvod_events_sent_total") == 3
    assert value(during, "kvod_event_bytes_sent_total") > 3 * 20
    assert value(during, "kvod_connections_accepted_total", transport="tcp") == 8
    assert value(during, "kvod_connections_accepted_total", transport="websocket") == 2
    assert value(during, "kvod_objects") == 1
    assert value(during, "kvod_revision") == 9
    assert value(during, "kvod_history_entries") == 9
    assert value(during, "kvod_group_commit_seconds_count") == 9
    assert value(during, "kvod_group_commit_seconds_bucket", le="+Inf") == 9
    assert value(during, "kvod_loop_iteration_seconds_count") > 0
    assert value(during, "process_resident_memory_bytes") > 1e6
    after = scrape(kvod)
    assert value(after, "kvod_connections", transport="websocket") == 0
    assert value(after, "kvod_observations") == 0


def test_a_slow_consumer_disconnect_is_counted(kvod_factory):
    import socket
    import time
    kvod = kvod_factory("--max-output-buffer", str(128 * 1024))
    kvod.tcp_call({"op": "create", "object": "feed", "values": {"v": ""}})
    slow = socket.create_connection(("127.0.0.1", kvod.port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.sendall(b'{"op":"observe","object":"feed","keyPath":"v","options":["new"]}\n')
    # Wait for the observe's reply (not a fixed sleep: under load kvod may not have registered it in 0.3 s,
    # and then no event ever reaches the slow reader), then read nothing more from this socket.
    reply = b""
    slow.settimeout(10)
    while b"\n" not in reply:
        reply += slow.recv(4096)
    assert b'"ok":true' in reply, reply
    with socket.create_connection(("127.0.0.1", kvod.port)) as writer:
        for i in range(200):
            writer.sendall((json.dumps({"op": "set", "object": "feed", "keyPath": "v", "value": str(i) * 8000}) + "\n").encode())
        received = b""
        while received.count(b"\n") < 200:
            received += writer.recv(65536)
    deadline = time.time() + 10
    while time.time() < deadline and value(scrape(kvod), "kvod_slow_consumer_disconnects_total", limit="connection") < 1:
        time.sleep(0.2)
    assert value(scrape(kvod), "kvod_slow_consumer_disconnects_total", limit="connection") == 1
    slow.close()


def test_build_info_and_process_metrics(kvod_factory):
    import os
    import time
    before = time.time()
    kvod = kvod_factory()
    version = kvod.tcp_call({"op": "hello", "id": 1})["version"]
    samples = scrape(kvod)
    info = [dict(key[1]) for key in samples if key[0] == "kvod_build_info"]
    assert len(info) == 1 and set(info[0]) == {"version", "commit"}
    assert info[0]["version"] == version
    # The commit the binary was built from (the checkout's HEAD), or "unknown" from a build without .git;
    # kvod --version shows its first 7 digits.
    commit = info[0]["commit"]
    assert commit == "unknown" or re.fullmatch(r"[0-9a-f]{40}", commit), commit
    assert value(samples, "kvod_build_info", version=version, commit=commit) == 1
    import subprocess
    printed = subprocess.run([kvod.process.args[0], "--version"], capture_output=True, text=True, check=True).stdout
    assert printed == (f"{version}\n" if commit == "unknown" else f"{version} ({commit[:7]})\n")
    assert value(samples, "process_virtual_memory_bytes") >= value(samples, "process_resident_memory_bytes") > 1e6
    assert before - 1 <= value(samples, "process_start_time_seconds") <= time.time()
    cpu = value(samples, "process_cpu_seconds_total")
    assert cpu > 0
    pid = kvod.process.pid
    with open(f"/proc/{pid}/limits") as limits:
        soft = next(line for line in limits if line.startswith("Max open files")).split()[3]
    assert value(samples, "process_max_fds") == int(soft)
    # Open descriptors follow the connections: ten more held open, ten more counted (the scrape's own
    # connection is open in both scrapes).
    import socket
    held = [socket.create_connection(("127.0.0.1", kvod.port)) for _ in range(10)]
    for sock in held:
        sock.sendall(b'{"op":"ping"}\n')
        assert b'"ok":true' in sock.recv(4096)
    during = scrape(kvod)
    assert 10 <= value(during, "process_open_fds") - value(samples, "process_open_fds") <= 11
    assert abs(value(during, "process_open_fds") - len(os.listdir(f"/proc/{pid}/fd"))) <= 2
    assert value(during, "process_open_fds") < value(during, "process_max_fds")
    for sock in held:
        sock.close()
    for i in range(50):
        kvod.tcp_call({"op": "ping", "id": i})
    assert value(scrape(kvod), "process_cpu_seconds_total") >= cpu


def test_refused_connections_are_counted_by_reason(kvod_factory):
    import socket
    kvod = kvod_factory("--max-connections", "2")
    assert value(scrape(kvod), "kvod_connections_refused_total", reason="max_connections") == 0
    assert ("kvod_connections_refused_total", (("reason", "file_descriptors"),)) in scrape(kvod)
    held = [socket.create_connection(("127.0.0.1", kvod.port), timeout=10) for _ in range(2)]
    for sock in held:
        sock.sendall(b'{"op":"ping"}\n')
        assert b'"ok":true' in sock.recv(4096)
    refused = kvod.tcp_call({"op": "ping"})
    assert refused["error"]["code"] == "too_many_connections"
    status, _, _ = kvod.http_get("/metrics")
    assert status == 503
    held.pop().close()
    import time
    deadline = time.time() + 10
    while True:
        status, _, _ = kvod.http_get("/healthz")
        if status == 200 or time.time() > deadline:
            break
        time.sleep(0.05)
    samples = scrape(kvod)
    # The TCP refusal, the 503 and any /healthz refused while the closed connection was still counted.
    assert value(samples, "kvod_connections_refused_total", reason="max_connections") >= 2
    assert value(samples, "kvod_connections_refused_total", reason="file_descriptors") == 0
    for sock in held:
        sock.close()


def test_tls_handshake_failures_are_counted(kvod_factory, tmp_path):
    import socket
    import subprocess
    import time
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem"), "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    kvod = kvod_factory("--tls-port", "0", "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem"),
                        "--tls-handshake-timeout", "0.5")
    assert kvod.tls_port
    samples = scrape(kvod)
    assert value(samples, "kvod_tls_handshake_failures_total", reason="error") == 0
    assert ("kvod_tls_handshake_failures_total", (("reason", "timeout"),)) in samples
    # Plaintext on the TLS port: the handshake fails.
    with socket.create_connection(("127.0.0.1", kvod.tls_port), timeout=10) as sock:
        sock.sendall(b'{"op":"ping"}\n')
        try:
            while sock.recv(4096):
                pass
        except ConnectionResetError:
            pass
    # Silence: the handshake times out.
    with socket.create_connection(("127.0.0.1", kvod.tls_port), timeout=10) as sock:
        try:
            while sock.recv(4096):
                pass
        except ConnectionResetError:
            pass
    deadline = time.time() + 10
    while time.time() < deadline and value(scrape(kvod), "kvod_tls_handshake_failures_total", reason="timeout") < 1:
        time.sleep(0.1)
    samples = scrape(kvod)
    assert value(samples, "kvod_tls_handshake_failures_total", reason="error") == 1
    assert value(samples, "kvod_tls_handshake_failures_total", reason="timeout") == 1


OPERATIONS = {"hello", "auth", "admin", "create", "delete", "get", "set", "increment", "insert", "remove", "replace",
              "observe", "unobserve", "list", "info", "ping", "defineClass", "classes", "bind", "unbind", "bindings",
              "digest", "invalid"}


def pipelined(kvod, requests):
    """Sends the requests on one TCP connection at once; returns the replies."""
    with socket.create_connection(("127.0.0.1", kvod.port), timeout=10) as sock:
        sock.sendall(b"".join((json.dumps(request) + "\n").encode() for request in requests))
        received = b""
        while received.count(b"\n") < len(requests):
            chunk = sock.recv(65536)
            assert chunk, "kvod closed the connection"
            received += chunk
    return [json.loads(line) for line in received.splitlines()]


def histogram(samples, name, **labels):
    """(cumulative buckets by bound, sum, count) of one labelled histogram series."""
    buckets = {}
    for (sample, sample_labels), number in samples.items():
        sample_labels = dict(sample_labels)
        if sample == name + "_bucket" and {k: v for k, v in sample_labels.items() if k != "le"} == labels:
            buckets[float(sample_labels["le"])] = number
    return buckets, value(samples, name + "_sum", **labels), value(samples, name + "_count", **labels)


def test_request_durations_by_operation(kvod_factory):
    kvod = kvod_factory()
    kvod.tcp_call({"op": "create", "object": "m", "values": {"v": 0}})
    before = scrape(kvod)
    n = 50
    replies = pipelined(kvod, [{"op": "set", "object": "m", "keyPath": "v", "value": i} for i in range(n)]
                        + [{"op": "get", "object": "missing"}, {"op": "no-such-op"}])
    assert all(reply["ok"] for reply in replies[:n])

    async def over_websocket():
        async with connect(kvod.ws_url) as client:
            for i in range(3):
                await client.send(json.dumps({"op": "set", "id": i, "object": "m", "keyPath": "v", "value": -i}))
                assert json.loads(await client.recv())["ok"]

    asyncio.run(asyncio.wait_for(over_websocket(), 30))
    after = scrape(kvod)
    name = "kvod_request_duration_seconds"
    _, sum_before, count_before = histogram(before, name, op="set")
    buckets, sum_after, count_after = histogram(after, name, op="set")
    # Every set counted once, whichever door it came in by (TCP, WebSocket), and as many as were answered.
    assert count_after - count_before == n + 3
    assert count_after == sum(number for (sample, labels), number in after.items()
                              if sample == "kvod_requests_total" and dict(labels)["op"] == "set")
    assert 0 < sum_after - sum_before < (n + 3) * 1.0
    bounds = sorted(buckets)
    assert bounds[0] <= 10e-6 and 1.0 <= bounds[-2] and bounds[-1] == float("inf")
    cumulative = [buckets[bound] for bound in bounds]
    assert cumulative == sorted(cumulative) and cumulative[-1] == count_after
    # A failed request and an undecodable one are timed too, under their operation and under `invalid`.
    assert histogram(after, name, op="get")[2] == 1
    assert histogram(after, name, op="invalid")[2] == 1
    # Only the operations' names are labels (a closed set), and only those answered appear.
    ops = {dict(labels)["op"] for (sample, labels) in after if sample == name + "_count"}
    assert ops <= OPERATIONS and {"create", "set", "get", "invalid"} <= ops and "delete" not in ops


def test_storage_gauges_follow_the_data_directory(kvod_factory, tmp_path):
    data = tmp_path / "data"
    kvod = kvod_factory("--data", str(data))
    database = data / "kvod.sqlite3"
    first = scrape(kvod)
    assert value(first, "kvod_storage_database_bytes") == os.path.getsize(database) > 0
    wal = data / "kvod.sqlite3-wal"
    assert value(first, "kvod_storage_wal_bytes") == (os.path.getsize(wal) if wal.exists() else 0)
    filesystem = os.statvfs(data)
    assert value(first, "kvod_storage_size_bytes") == filesystem.f_blocks * filesystem.f_frsize
    assert 0 < value(first, "kvod_storage_free_bytes") <= value(first, "kvod_storage_size_bytes")
    pipelined(kvod, [{"op": "create", "object": f"o{i}", "values": {"text": "x" * 2000}} for i in range(100)])
    second = scrape(kvod)
    stored = lambda samples: value(samples, "kvod_storage_database_bytes") + value(samples, "kvod_storage_wal_bytes")
    assert stored(second) >= stored(first) + 100 * 2000
    assert value(second, "kvod_storage_wal_bytes") == (os.path.getsize(wal) if wal.exists() else 0)


def test_storage_gauges_are_absent_in_memory(kvod_factory):
    samples = scrape(kvod_factory())
    usage = {f"kvod_storage_{name}_bytes" for name in ("database", "wal", "free", "size")}
    assert not [key for key in samples if key[0] in usage]


def test_a_password_check_is_timed_to_its_answer(kvod_factory, tmp_path):
    """`auth` is answered after the check on the thread pool, outside the request's dispatch: it carries its
    start, so each one is timed (and the histogram's count stays equal to the requests counted)."""
    import subprocess
    from conftest import KVOD_BIN
    users = tmp_path / "users.json"
    subprocess.run([KVOD_BIN, "user", "add", "--users", str(users), "ann", "*=read,write", "--hash-cost", "minimal"],
                   check=True, capture_output=True, env={"KVOD_PASSWORD": "correct horse battery"})
    kvod = kvod_factory("--users", str(users))
    replies = pipelined(kvod, [{"op": "auth", "user": "ann", "password": "wrong"},
                               {"op": "auth", "user": "ann", "password": "correct horse battery"},
                               {"op": "ping"}])
    assert [reply["ok"] for reply in replies] == [False, True, True]
    samples = scrape(kvod)
    assert histogram(samples, "kvod_request_duration_seconds", op="auth")[2] == 2
    assert value(samples, "kvod_requests_total", op="auth", outcome="ok") == 1
    assert value(samples, "kvod_requests_total", op="auth", outcome="unauthenticated") == 1
    assert histogram(samples, "kvod_request_duration_seconds", op="ping")[2] == 1


def test_the_metrics_operation_serves_the_same_text_to_server_admins_only(kvod_factory, tmp_path):
    """`{"op":"metrics"}` answers with what GET /metrics serves (the inspector's dashboard reads it this way:
    no token to ask for, and no refused HTTP request in the browser's log); it needs a server admin."""
    import subprocess
    from conftest import KVOD_BIN
    open_mode = kvod_factory()
    open_mode.tcp_call({"op": "create", "object": "m"})
    reply = open_mode.tcp_call({"op": "metrics", "id": 1})
    assert reply["ok"] is True and reply["id"] == 1
    families = {family.name: family for family in text_string_to_metric_families(reply["text"])}
    assert families["kvod_revision"].samples[0].value == 1
    assert set(families) == {family.name for family in text_string_to_metric_families(open_mode.http_get("/metrics")[2].decode())}
    users = tmp_path / "users.json"
    for name, rule in (("root", "*=read,write,admin"), ("ann", "ann-*=read,write,admin")):
        subprocess.run([KVOD_BIN, "user", "add", "--users", str(users), name, rule, "--hash-cost", "minimal"],
                       check=True, capture_output=True, env={"KVOD_PASSWORD": "pw"})
    kvod = kvod_factory("--users", str(users))
    ann = pipelined(kvod, [{"op": "auth", "user": "ann", "password": "pw"}, {"op": "metrics"}, {"op": "ping"}])
    assert ann[0]["ok"] is True
    assert ann[1]["ok"] is False and ann[1]["error"]["code"] == "forbidden", ann[1]
    assert ann[2]["ok"] is True
    root = pipelined(kvod, [{"op": "auth", "user": "root", "password": "pw"}, {"op": "metrics"}])
    assert root[1]["ok"] is True and "kvod_connections" in root[1]["text"]
    anonymous = kvod.tcp_call({"op": "metrics"})
    assert anonymous["ok"] is False and anonymous["error"]["code"] == "unauthenticated", anonymous
