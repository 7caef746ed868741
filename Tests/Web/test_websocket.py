"""WebSocket at /ws with a real client library (Python `websockets`): the JSON-lines protocol, one message
per text frame, with the same replies, events, errors and ordering as TCP."""
import asyncio
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 30))


async def call(ws, request):
    await ws.send(json.dumps(request))
    return json.loads(await ws.recv())


def test_requests_observations_and_events_flow_as_over_tcp(kvod):
    async def scenario():
        async with connect(kvod.ws_url) as writer, connect(kvod.ws_url) as watcher:
            assert (await call(writer, {"op": "create", "id": 1, "object": "user:1",
                                        "values": {"name": "Ann", "address": {"city": "Oslo"}}}))["ok"]
            reply = await call(watcher, {"op": "observe", "id": "w", "object": "user:1", "keyPath": "address.city",
                                         "options": ["initial", "new", "old"]})
            assert reply["ok"] and reply["id"] == "w"
            initial = json.loads(await watcher.recv())
            assert initial["change"]["new"] == "Oslo" and initial["sub"] == reply["sub"]
            assert (await call(writer, {"op": "set", "id": 2, "object": "user:1", "keyPath": "address",
                                        "value": {"city": "Bergen", "zip": "5003"}}))["ok"]
            event = json.loads(await watcher.recv())
            assert event["event"] == "change" and event["reason"] == "valueChanged"
            assert event["change"] == {"kind": 1, "new": "Bergen", "old": "Oslo"}
            # The same request over TCP sees the WebSocket client's write.
            assert kvod.tcp_call({"op": "get", "object": "user:1", "keyPath": "address.city"})["value"] == "Bergen"
            # Errors are replies, and the connection keeps serving.
            error = await call(writer, {"op": "get", "id": 3, "object": "nobody"})
            assert error == {"id": 3, "ok": False, "error": error["error"]} and error["error"]["code"] == "not_found"
            malformed = await call(writer, "{not json")
            assert malformed["ok"] is False and malformed["error"]["code"] == "bad_request"
            assert (await call(writer, {"op": "ping", "id": 4}))["ok"]
    run(scenario())


def test_pipelined_requests_are_answered_in_order(kvod):
    async def scenario():
        async with connect(kvod.ws_url) as ws:
            await ws.send(json.dumps({"op": "create", "object": "c", "values": {"n": 0}}))
            await ws.recv()
            for i in range(200):
                await ws.send(json.dumps({"op": "set", "id": i, "object": "c", "keyPath": "n", "value": i}))
            ids = [json.loads(await ws.recv())["id"] for _ in range(200)]
            assert ids == list(range(200))
    run(scenario())


def test_compact_events_over_websocket(kvod):
    async def scenario():
        async with connect(kvod.ws_url) as ws:
            assert (await call(ws, {"op": "hello", "id": 1, "events": "compact"}))["events"] == "compact"
            await call(ws, {"op": "create", "id": 2, "object": "o", "values": {"v": 1}})
            sub = (await call(ws, {"op": "observe", "id": 3, "object": "o", "keyPath": "v", "options": ["new"]}))["sub"]
            await ws.send(json.dumps({"op": "set", "id": 4, "object": "o", "keyPath": "v", "value": [1, {"a": "é"}]}))
            messages = [json.loads(await ws.recv()) for _ in range(2)]
            event = next(m for m in messages if "s" in m)
            assert event == {"s": sub, "r": 2, "n": [1, {"a": "é"}]}
    run(scenario())


def test_fragmented_messages_are_reassembled(kvod):
    async def scenario():
        async with connect(kvod.ws_url) as ws:
            text = json.dumps({"op": "create", "id": "frag", "object": "f", "values": {"text": "x" * 5000}})
            await ws.send([text[:10], text[10:2000], text[2000:]])  # three frames: text, continuation, continuation
            reply = json.loads(await ws.recv())
            assert reply == {"id": "frag", "ok": True, "rev": reply["rev"]}
    run(scenario())


def test_ping_is_answered_with_pong(kvod):
    async def scenario():
        async with connect(kvod.ws_url, ping_interval=None) as ws:
            latency = await asyncio.wait_for(await ws.ping(b"are you there"), 5)
            assert latency >= 0
    run(scenario())


def test_close_handshake_from_the_client(kvod):
    async def scenario():
        ws = await connect(kvod.ws_url)
        await ws.close(1000, "done")
        assert ws.close_code == 1000
        assert ws.protocol.close_rcvd is not None and ws.protocol.close_rcvd.code == 1000
    run(scenario())
    kvod.assert_serving()


def test_observations_end_with_the_websocket(kvod):
    async def scenario():
        async with connect(kvod.ws_url) as ws:
            await call(ws, {"op": "create", "id": 1, "object": "o", "values": {"v": 1}})
            await call(ws, {"op": "observe", "id": 2, "object": "o", "keyPath": "v"})
            info = kvod.tcp_call({"op": "info", "object": "o"})
            assert len(info["observers"]) == 1
    run(scenario())
    for _ in range(50):
        if not kvod.tcp_call({"op": "info", "object": "o"})["observers"]:
            break
        asyncio.run(asyncio.sleep(0.1))
    assert kvod.tcp_call({"op": "info", "object": "o"})["observers"] == []


def test_authentication_over_websocket(kvod_factory, tmp_path):
    import subprocess
    from conftest import KVOD_BIN
    users = tmp_path / "users.json"
    subprocess.run([KVOD_BIN, "user", "add", "--users", str(users), "ann", "*=read,write", "--hash-cost", "minimal"],
                   check=True, capture_output=True, env={"KVOD_PASSWORD": "correct horse battery"})
    server = kvod_factory("--users", str(users))

    async def scenario():
        async with connect(server.ws_url) as ws:
            refused = await call(ws, {"op": "get", "id": 1, "object": "o"})
            assert refused["error"]["code"] == "unauthenticated"
            wrong = await call(ws, {"op": "auth", "id": 2, "user": "ann", "password": "nope"})
            assert wrong["error"]["code"] == "unauthenticated"
            assert (await call(ws, {"op": "auth", "id": 3, "user": "ann", "password": "correct horse battery"}))["ok"]
            assert (await call(ws, {"op": "create", "id": 4, "object": "o", "values": {}}))["ok"]
    run(scenario())


def test_server_stop_closes_websockets_with_going_away(kvod_factory):
    server = kvod_factory()

    async def scenario():
        async with connect(server.ws_url) as ws:
            await call(ws, {"op": "ping", "id": 1})
            server.stop()
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    run(scenario())


def test_kill_closes_a_websocket_with_policy_violation_and_says_who(kvod):
    """`kill` (issue 42): a WebSocket client is listed by `clients` as `websocket` and, killed, gets the `closed`
    error's reason in a close frame with code 1008; its observation ends as on any disconnect."""
    async def scenario():
        async with connect(kvod.ws_url) as ws:
            hello = await call(ws, {"op": "hello", "id": 1})
            await call(ws, {"op": "create", "id": 2, "object": "k", "values": {"v": 1}})
            await call(ws, {"op": "observe", "id": 3, "object": "k", "keyPath": "v"})
            clients = kvod.tcp_call({"op": "clients"})["clients"]
            mine = [c for c in clients if c["connection"] == hello["connection"]]
            assert len(mine) == 1 and mine[0]["kind"] == "websocket" and mine[0]["observations"] == 1
            killed = kvod.tcp_call({"op": "kill", "connection": hello["connection"]})
            assert killed["ok"] is True and killed["own"] is False
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
            assert closed.value.rcvd.reason.startswith("closed by a server admin (kill from connection ")
    run(scenario())
    assert kvod.tcp_call({"op": "info", "object": "k"})["observers"] == []
