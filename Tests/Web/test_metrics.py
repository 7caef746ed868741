"""GET /metrics, read by the Prometheus project's own parser (prometheus_client), checked against the
activity the test caused."""
import asyncio
import json

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
    time.sleep(0.3)
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
