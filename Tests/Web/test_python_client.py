"""The Python client (clients/python, package `kvod`) against the real kvod binary over TCP and TLS.

The package is imported from clients/python (added to sys.path here), as `pip install ./clients/python` would
install it. Each test runs one asyncio scenario under a deadline. Reconnection is tested across a SIGKILL and a
restart of kvod on the same port with its data directory, and across a network that goes silent (a proxy that
blackholes a connection's bytes).
"""
import asyncio
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import KVOD, ROOT

sys.path.insert(0, str(ROOT / "clients" / "python"))
import kvod  # noqa: E402


@pytest.fixture
def server(kvod_factory):
    return kvod_factory()


def run(scenario, timeout=30):
    return asyncio.run(asyncio.wait_for(scenario, timeout))


async def next_change(observation, timeout=10):
    return await asyncio.wait_for(observation.__anext__(), timeout)


async def changes(observation, count, timeout=10):
    return [await next_change(observation, timeout) for _ in range(count)]


def test_values_round_trip_and_reads(server):
    async def scenario():
        async with kvod_connect(server) as c:
            value = {"z": 1, "a": [1.0, 2, -0.0, 1e-7, 0.1, 2 ** 63 - 1, -2 ** 63, 1.7976931348623157e308, 5e-324],
                     "é": "\u0000\"\\ \u2028 😀 日本", "m": {"y": None, "b": True, "": False}, "f": 3.0}
            rev = await c.create("doc", {"v": value})
            got = await c.get("v", of="doc")
            assert got == value
            assert [type(x) for x in got["a"]] == [type(x) for x in value["a"]]  # 1.0 stays a float, 2 an int
            assert type(got["f"]) is float and math.copysign(1, got["a"][2]) == -1
            read = await c.read("v.é", of="doc")
            assert (read.value, read.rev, read.changed_rev, read.expires_at) == (value["é"], rev, rev, None)
            assert await c.get("missing", of="doc") is None
            assert await c.get(of="doc") == {"v": value}
            # Refused before sending: kvod keeps integers exact (it would refuse the line without its id).
            with pytest.raises(ValueError):
                await c.set("v", 2 ** 64, of="doc")
            with pytest.raises(ValueError):
                await c.set("v", float("nan"), of="doc")
            assert (await c.increment("n", of="doc", by=2.5)).value == 2.5
            assert await c.list() == ["doc"]
    run(scenario())


def test_errors_are_exceptions_with_kvods_code_and_the_connection_keeps_serving(kvod_factory):
    server = kvod_factory("--max-line", "2000")

    async def scenario():
        async with kvod_connect(server) as c:
            with pytest.raises(kvod.NotFoundError) as missing:
                await c.get("x", of="nobody")
            assert missing.value.code == "not_found" and "nobody" in missing.value.message
            await c.create("a", {"n": 1})
            with pytest.raises(kvod.ExistsError):
                await c.create("a")
            with pytest.raises(kvod.BadRequestError) as strict:  # strict requests: an undeclared field is refused
                await c.send({"op": "set", "object": "a", "keyPath": "n", "value": 2,
                              "ifequals": {"keyPath": "n", "value": 1}})
            assert strict.value.details["field"] == "ifequals" and "ifEquals" in strict.value.message
            with pytest.raises(kvod.KvodError) as unknown:
                await c.request("frobnicate")
            assert unknown.value.code == "unknown_op" and type(unknown.value) is kvod.KvodError
            with pytest.raises(kvod.KvodError) as mismatch:
                await c.set("n.deeper", 1, of="a")
            assert mismatch.value.code == "type_mismatch"
            # A line over --max-line is answered without an id: it is matched to its request by order.
            with pytest.raises(kvod.KvodError) as large:
                await c.set("n", "x" * 5000, of="a")
            assert large.value.code == "too_large"
            assert await c.get("n", of="a") == 1
            with pytest.raises(kvod.ClosedError):
                await c.close()
                await c.get("n", of="a")
    run(scenario())


def test_conditions(server):
    async def scenario():
        async with kvod_connect(server) as c:
            await c.create("acct", {"balance": 100}, ifAbsent=True)
            with pytest.raises(kvod.ConflictError) as absent:
                await c.create("acct", ifAbsent=True)
            assert absent.value.details["condition"] == "ifAbsent" and absent.value.details["exists"] is True
            await c.set("balance", 90, of="acct", ifEquals=("balance", 100))
            with pytest.raises(kvod.ConflictError) as equals:
                await c.set("balance", 80, of="acct", ifEquals={"keyPath": "balance", "value": 100})
            assert equals.value.details == {"condition": "ifEquals", "rev": 2, "value": 90}
            read = await c.read(of="acct")
            await c.increment("balance", of="acct", by=-10, ifRev=read.changed_rev)
            with pytest.raises(kvod.ConflictError) as stale:
                await c.set("balance", 0, of="acct", ifRev=read.changed_rev)
            assert stale.value.details["changedRev"] == 3
            with pytest.raises(kvod.ConflictError):
                await c.delete("nothing", ifExists=True)
            assert await c.get("balance", of="acct") == 80
            await c.delete("acct", ifExists=True)
    run(scenario())


def test_batch_all_or_nothing(server):
    async def scenario():
        async with kvod_connect(server) as c:
            await c.create("alice", {"balance": 100})
            await c.create("bob", {"balance": 0})
            moved = await c.batch([kvod.ops.increment("balance", of="alice", by=-30, ifEquals=("balance", 100)),
                                   kvod.ops.increment("balance", of="bob", by=30)])
            assert moved.results == [{"value": 70}, {"value": 30}] and moved.rev == 3
            with pytest.raises(kvod.NotFoundError) as refused:
                await c.batch([kvod.ops.set("balance", 0, of="alice"), kvod.ops.delete("carol")])
            assert refused.value.details["part"] == 1
            with pytest.raises(kvod.ConflictError) as conflict:
                await c.batch([kvod.ops.set("balance", 0, of="alice", ifRev=1)])
            assert conflict.value.details["part"] == 0
            assert (await c.get("balance", of="alice"), await c.get("balance", of="bob")) == (70, 30)
    run(scenario())


def test_observe_options_prior_and_end(server):
    async def scenario():
        async with kvod_connect(server) as c, kvod_connect(server, events="full") as full:
            await c.create("clock", {"date": "mon", "items": [1]})
            compact = c.observe("date", of="clock", options=("initial", "new", "old", "prior"))
            verbose = full.observe("date", of="clock", options=("initial", "new", "old", "prior"))
            items = c.observe("items", of="clock", options=("new", "old"))
            await compact.ready(), await verbose.ready(), await items.ready()
            await c.set("date", "tue", of="clock")
            await c.insert("items", [2, 3], of="clock")
            await c.delete("clock")
            for observation in (compact, verbose):  # both encodings decode to the same changes
                seen = [(x.reason, x.new if x.has_new else "-", x.old if x.has_old else "-", x.is_prior)
                        async for x in observation]
                assert seen == [("initial", "mon", "-", False), ("valueChanged", "-", "mon", True),
                                ("valueChanged", "tue", "mon", False), ("sourceDeleted", "-", "tue", True),
                                ("sourceDeleted", None, "tue", False)]
            inserted = await next_change(items)
            assert (inserted.kind, inserted.indexes, inserted.new) == (2, [1, 2], [2, 3])
            assert (await next_change(items)).reason == "sourceDeleted"
            with pytest.raises(kvod.NotFoundError):
                async for _ in c.observe("date", of="clock"):
                    pass
    run(scenario())


def test_pattern_observation_and_live_query(server):
    async def scenario():
        async with kvod_connect(server) as c:
            await c.create("order:1", {"status": "open", "total": 150})
            await c.create("order:2", {"status": "open", "total": 50})
            ids = c.observe(pattern="order:*", options=("initial",))
            live = c.observe("total", pattern="order:*", where="status == 'open' && total > 100",
                             options=("initial", "new", "old"))
            first = await next_change(ids)
            assert (first.reason, first.ids, first.object) == ("initial", ["order:1", "order:2"], None)
            assert [(x.reason, x.object, x.new) for x in await changes(live, 1)] == [("initial", "order:1", 150)]
            await c.set("total", 120, of="order:2")
            await c.set("status", "closed", of="order:1")
            await c.create("order:3", {"status": "open", "total": 300})
            await c.delete("order:2")
            assert [(x.reason, x.object, x.new, x.old) for x in await changes(live, 4)] == [
                ("entered", "order:2", 120, None), ("left", "order:1", None, 150),
                ("entered", "order:3", 300, None), ("left", "order:2", None, 120)]
            assert [(x.reason, x.object) for x in await changes(ids, 2)] == [
                ("created", "order:3"), ("sourceDeleted", "order:2")]
            with pytest.raises(kvod.KvodError) as bad:
                await c.observe(pattern="order:*", where="status == ").ready()
            assert bad.value.code == "invalid_expression" and bad.value.details["field"] == "where"
    run(scenario())


def test_auth_with_password_and_token_and_tls(kvod_factory, tmp_path):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem"), "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                   capture_output=True)
    server = kvod_factory("--tls-port", "0", "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key",
                          str(tmp_path / "key.pem"))

    async def scenario():
        async with kvod_connect(server) as admin:
            await admin.request("userAdd", {"user": "ada", "password": "pw", "hashCost": "minimal",
                                            "rules": [{"objects": "*", "allow": ["read", "write", "admin"]}]})
        async with kvod.connect("127.0.0.1", server.port, user="ada", password="pw") as ada:
            token = (await ada.request("tokenCreate", {"user": "ada"}))["token"]
        with pytest.raises(kvod.UnauthenticatedError):
            await kvod.connect("127.0.0.1", server.port, user="ada", password="wrong")
        context = __import__("ssl").create_default_context(cafile=str(tmp_path / "cert.pem"))
        async with kvod.connect("127.0.0.1", server.tls_port, user="ada", password="pw", tls=context) as c:
            assert c.user == "ada"
            await c.create("secret", {"v": "x" * 100_000})
        async with kvod.connect("127.0.0.1", server.port, token=token) as c:
            assert c.user == "ada" and await c.get("v", of="secret") == "x" * 100_000
        async with kvod.connect("127.0.0.1", server.port) as anonymous:
            with pytest.raises(kvod.UnauthenticatedError):
                await anonymous.get(of="secret")
    run(scenario())


def kvod_connect(server, **options):
    options.setdefault("max_delay", 0.5)
    return kvod.connect("127.0.0.1", server.port, **options)


def test_since_rev_replays_and_resync_past_history(server):
    async def scenario():
        async with kvod_connect(server) as c:
            await c.create("x", {"n": 0})
            for n in (1, 2, 3):
                await c.set("n", n, of="x")
            replayed = c.observe("n", of="x", options=("new",), since_rev=2)
            beyond = c.observe("n", of="x", options=("new",), since_rev=1000)  # as after a wiped data directory
            assert [(x.reason, x.new, x.rev) for x in await changes(replayed, 2)] == [
                ("valueChanged", 2, 3), ("valueChanged", 3, 4)]
            assert [(x.reason, x.new, x.rev) for x in await changes(beyond, 1)] == [("resync", 3, 4)]
            await c.set("n", 4, of="x")
            assert [(x.new, x.rev) for x in await changes(replayed, 1)] == [(4, 5)]
            assert [(x.new, x.rev) for x in await changes(beyond, 1)] == [(4, 5)]
    run(scenario())


def test_large_values_span_many_reads(server):
    """Values of 800 KB (many 64 KiB reads each) come back whole, to a read and to an observer."""
    async def scenario():
        async with kvod_connect(server) as c:
            chunk = "é" * 400_000
            await c.create("big", {"k0": chunk})
            observation = c.observe("k1", of="big", options=("new",))
            await observation.ready()
            await c.set("k1", chunk + "!", of="big")
            assert await c.get(of="big") == {"k0": chunk, "k1": chunk + "!"}
            assert (await next_change(observation)).new == chunk + "!"
    run(scenario())


def test_signals_ttl_and_unannounced_features(server):
    async def scenario():
        async with kvod_connect(server) as c:
            await c.create("room", {"topic": "kvo"}, ttl=60)
            read = await c.read(of="room")
            assert read.expires_at is not None and await c.touch("room") >= read.expires_at
            topic = c.observe("topic", of="room", options=("new",))
            await topic.ready()
            await c.signal("room", {"user": "ada", "x": 1})
            signal = await next_change(topic)
            assert (signal.reason, signal.new, signal.key_path, signal.rev) == ("signal", {"user": "ada", "x": 1},
                                                                               None, read.rev)
            await c.set("topic", "python", of="room")
            assert (await next_change(topic)).new == "python"
            with pytest.raises(kvod.NotFoundError):
                await c.signal("nowhere", 1)
            # A field the server did not announce is not sent (as if kvod were older than `conditions`).
            c.features.remove("conditions")
            with pytest.raises(kvod.NotAnnouncedError) as refused:
                await c.batch([kvod.ops.set("topic", "x", of="room", ifRev=1)])
            assert refused.value.details == {"feature": "conditions"}
            assert await c.get("topic", of="room") == "python"
    run(scenario())


def test_update_loses_no_concurrent_update(server):
    """Two clients add to one number through update() 40 times each, at once: every addition counts."""
    async def scenario():
        async with kvod_connect(server) as a, kvod_connect(server) as b:
            await a.create("tally", {"n": 0})
            calls = []

            def add_one(value):
                calls.append(value)
                return (value or 0) + 1

            async def adder(client):
                for _ in range(40):
                    await client.update("n", add_one, of="tally")
            await asyncio.gather(adder(a), adder(b))
            assert await a.get("n", of="tally") == 80
            assert len(calls) > 80  # the two collided at least once: the conflict's value was used
            value, rev = await a.update("missing", lambda value: [value], of="tally")
            assert value == [None] and await a.get("missing", of="tally") == [None]
    run(scenario())
