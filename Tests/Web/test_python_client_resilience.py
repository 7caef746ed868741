"""The Python client (clients/python) when connections fail: kvod killed with SIGKILL and restarted on the same
port with its data directory, a network that goes silent (a proxy that blackholes a connection), kvod's own
heartbeat, and presence sessions whose client vanishes or comes back within the grace."""
import asyncio
import signal
import subprocess
import sys
import time

import pytest

from conftest import KVOD, ROOT

sys.path.insert(0, str(ROOT / "clients" / "python"))
import kvod  # noqa: E402


def run(scenario, timeout=60):
    return asyncio.run(asyncio.wait_for(scenario, timeout))


async def next_change(observation, timeout=10):
    return await asyncio.wait_for(observation.__anext__(), timeout)


async def assert_nothing_more(observation, wait=0.3):
    with pytest.raises(asyncio.TimeoutError):
        change = await asyncio.wait_for(observation.__anext__(), wait)
        print("unexpected", change)


class Proxy:
    """A TCP relay to kvod on a port of its own. `blackhole()` makes its present connections drop every byte
    both ways while staying open (a network gone silent: no FIN, no RST); `cut()` closes them. Connections made
    afterwards are relayed, unless `refusing` (then closed at once). `cut_after` (a predicate on a line kvod
    sends) cuts the connections right after the first line it accepts has been relayed, and is then cleared."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.pairs = []
        self.refusing = False
        self.cut_after = None

    async def start(self):
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _relay(self, reader, writer):
        if self.refusing:
            writer.close()
            return
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        pair = {"silent": False, "writers": (writer, upstream_writer)}
        self.pairs.append(pair)

        async def pump(source, destination, from_kvod):
            try:
                while data := await source.read(65536):
                    if from_kvod and self.cut_after is not None:
                        for line in data.splitlines(keepends=True):
                            destination.write(line)
                            if self.cut_after is not None and self.cut_after(line):
                                self.cut_after = None
                                await destination.drain()
                                self.cut()
                                return
                        await destination.drain()
                    elif not pair["silent"]:
                        destination.write(data)
                        await destination.drain()
            except (OSError, asyncio.CancelledError):
                pass
            if not pair["silent"]:
                destination.close()

        await asyncio.gather(pump(reader, upstream_writer, False), pump(upstream_reader, writer, True))

    def blackhole(self):
        for pair in self.pairs:
            pair["silent"] = True

    def cut(self):
        for pair in self.pairs:
            for writer in pair["writers"]:
                writer.transport.abort()

    def close(self):
        self.cut()
        self.server.close()


def test_observations_resume_exactly_once_across_a_sigkill_and_restart(tmp_path):
    """kvod is killed (SIGKILL) in the middle of a stream of writes and restarted on the same port with the same
    data directory. The writer retries what failed; the observer, which reconnects later than the writer (so it
    misses writes and gets them from history with sinceRev), sees every value exactly once and in order, on an
    observation of one key path and on a pattern observation fed by batches (two events per revision)."""
    data = str(tmp_path / "data")
    servers = [KVOD(["--data", data], tmp_path)]
    port = servers[0].port

    async def scenario():
        async with kvod.connect("127.0.0.1", port, min_delay=0.05, max_delay=0.2) as writer, \
                kvod.connect("127.0.0.1", port, min_delay=1.0, max_delay=1.0) as watcher:
            await writer.create("counter", {"n": 0})
            await writer.create("acct:a", {"n": 0})
            await writer.create("acct:b", {"n": 0})
            counter = watcher.observe("n", of="counter", options=("new",))
            accounts = watcher.observe("n", pattern="acct:*", options=("new", "old"))
            await counter.ready(), await accounts.ready()
            lost = 0
            for step in range(60):
                if step == 20:
                    servers[0].process.send_signal(signal.SIGKILL)
                    servers[0].process.wait()
                    await asyncio.sleep(0.2)
                    servers.append(await asyncio.to_thread(KVOD, ["--data", data, "--port", str(port)], tmp_path))
                for attempt in range(50):
                    try:
                        await writer.increment("n", of="counter")
                        await writer.batch([kvod.ops.increment("n", of="acct:a"), kvod.ops.increment("n", of="acct:b")])
                        break
                    except kvod.ConnectionLostError:
                        lost += 1  # it may or may not have been applied: the observer tells which
            assert writer.reconnections == 1
            final = await writer.get("n", of="counter")
            assert final >= 60
            values = [(await next_change(counter)).new for _ in range(final)]
            assert values == list(range(1, final + 1))
            final_a = await writer.get("n", of="acct:a")
            assert final_a == await writer.get("n", of="acct:b") and final_a >= 60
            seen = {"acct:a": [], "acct:b": []}
            revs = []
            for _ in range(2 * final_a):
                change = await next_change(accounts)
                assert change.old == change.new - 1
                seen[change.object].append(change.new)
                revs.append(change.rev)
            assert seen == {"acct:a": list(range(1, final_a + 1)), "acct:b": list(range(1, final_a + 1))}
            assert revs == sorted(revs)
            await assert_nothing_more(counter)
            await assert_nothing_more(accounts)
            assert watcher.reconnections == 1

    try:
        run(scenario())
    finally:
        code = servers[-1].stop()
        for server in servers[:-1]:
            server.stderr.close()
    assert code == 0


def test_heartbeat_notices_a_silent_server_and_resumes(kvod_factory):
    """The network goes silent (the proxy drops every byte of the connection, without closing it): the client's
    ping gets no answer within heartbeat_timeout, so it reconnects and resumes, getting what it missed."""
    server = kvod_factory()

    async def scenario():
        proxy = await Proxy(server.port).start()
        try:
            async with kvod.connect("127.0.0.1", server.port) as writer, \
                    kvod.connect("127.0.0.1", proxy.port, heartbeat=0.5, heartbeat_timeout=1.0, min_delay=0.05,
                                 max_delay=0.2) as watcher:
                await writer.create("clock", {"date": "mon"})
                observation = watcher.observe("date", of="clock", options=("new",))
                await observation.ready()
                await writer.set("date", "tue", of="clock")
                assert (await next_change(observation)).new == "tue"
                await asyncio.sleep(1.5)  # quiet but there: the client's pings are answered, nothing reconnects
                assert watcher.reconnections == 0
                states = []
                watcher.on_state = states.append
                proxy.blackhole()
                silent_since = time.monotonic()
                await writer.set("date", "wed", of="clock")
                await writer.set("date", "thu", of="clock")
                assert [(await next_change(observation)).new for _ in range(2)] == ["wed", "thu"]
                assert time.monotonic() - silent_since < 5
                await watcher.ping()  # the replayed changes come during the handshake, before the client is open
                assert states == ["reconnecting", "open"] and watcher.reconnections == 1
                await assert_nothing_more(observation)
        finally:
            proxy.close()

    run(scenario())


def test_kvods_heartbeat_is_answered_so_a_listening_client_is_not_closed(kvod_factory):
    """kvod (--idle-timeout 2) sends a heartbeat to a connection quiet for 1 s and closes it after 2 s of
    silence; the client, with its own pings off, answers each heartbeat, so it stays connected."""
    server = kvod_factory("--idle-timeout", "2")

    async def scenario():
        async with kvod.connect("127.0.0.1", server.port, heartbeat=0) as watcher, \
                kvod.connect("127.0.0.1", server.port, heartbeat=0) as writer:
            await writer.create("clock", {"date": "mon"})
            observation = watcher.observe("date", of="clock", options=("new",))
            await observation.ready()
            await asyncio.sleep(4.5)
            assert watcher.reconnections == 0 and watcher.state == "open"
            await writer.set("date", "tue", of="clock")
            assert (await next_change(observation)).new == "tue"
            assert writer.reconnections == 0

    run(scenario())


CHILD = """
import asyncio, sys
sys.path.insert(0, {path!r})
import kvod

async def main():
    c = await kvod.connect("127.0.0.1", {port})
    await c.start_session(grace=0)
    await c.set("online", True, of="users.ada")
    await c.on_disconnect(kvod.ops.set("online", False, of="users.ada"))
    await c.create("cursors.ada", {{"x": 1}}, ephemeral=True)
    print("ready", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


def test_on_disconnect_runs_when_the_client_vanishes(kvod_factory):
    """A client process with a presence session is killed (SIGKILL): kvod runs its onDisconnect write and
    deletes its ephemeral object."""
    server = kvod_factory()

    async def scenario():
        async with kvod.connect("127.0.0.1", server.port) as observer:
            await observer.create("users.ada", {"online": False})
            child = subprocess.Popen([sys.executable, "-c", CHILD.format(path=str(ROOT / "clients" / "python"),
                                                                         port=server.port)],
                                     stdout=subprocess.PIPE, text=True)
            try:
                assert await asyncio.to_thread(child.stdout.readline) == "ready\n"
                online = observer.observe("online", of="users.ada", options=("initial", "new"))
                cursor = observer.observe("x", of="cursors.ada", options=("initial", "new", "old"))
                assert (await next_change(online)).new is True
                assert (await next_change(cursor)).new == 1
                child.kill()
            finally:
                child.kill()
                child.wait()
                child.stdout.close()
            assert (await next_change(online)).new is False
            deleted = await next_change(cursor)
            assert (deleted.reason, deleted.old) == ("sourceDeleted", 1)

    run(scenario())


def test_a_session_is_resumed_after_a_reconnection_within_its_grace(kvod_factory):
    """The connection is cut (the proxy closes it): the client reconnects and resumes its session before the
    grace (1 s) ends, so nothing runs; end_session() then runs the action and deletes the ephemeral object.
    A session that ended meanwhile is reported to on_session_lost."""
    server = kvod_factory()

    async def scenario():
        proxy = await Proxy(server.port).start()
        try:
            async with kvod.connect("127.0.0.1", server.port) as observer, \
                    kvod.connect("127.0.0.1", proxy.port, min_delay=0.05, max_delay=0.2) as c:
                await c.create("users.ada", {"online": True})
                session = await c.start_session(grace=1)
                assert await c.on_disconnect(kvod.ops.set("online", False, of="users.ada")) == 1
                await c.create("cursors.ada", {"x": 1}, ephemeral=True)
                proxy.cut()
                await asyncio.sleep(1.5)
                assert c.reconnections == 1 and c.session == session
                assert await observer.get("online", of="users.ada") is True
                assert await observer.get("x", of="cursors.ada") == 1
                assert await c.end_session() == 2
                assert await observer.get("online", of="users.ada") is False
                assert "cursors.ada" not in await observer.list()

                lost = []
                c.on_session_lost = lost.append
                await c.start_session(grace=0)
                proxy.refusing = True
                proxy.cut()
                await asyncio.sleep(0.5)  # kvod ends the session meanwhile; the client's attempts are refused
                proxy.refusing = False
                await asyncio.sleep(0.5)
                assert c.reconnections == 2 and c.session is None and len(lost) == 1
        finally:
            proxy.close()

    run(scenario())


def test_a_cut_between_two_events_of_one_revision_delivers_the_rest_once(kvod_factory):
    """A batch gives a pattern observation two events with one revision; the connection is cut right after the
    first. The client resumes from the revision before (the one it was in was not complete) and skips the event
    it already delivered: the second comes, once."""
    server = kvod_factory()

    async def scenario():
        proxy = await Proxy(server.port).start()
        try:
            async with kvod.connect("127.0.0.1", server.port) as writer, \
                    kvod.connect("127.0.0.1", proxy.port, min_delay=0.05, max_delay=0.2) as watcher:
                await writer.create("acct:a", {"n": 0})
                await writer.create("acct:b", {"n": 0})
                accounts = watcher.observe("n", pattern="acct:*", options=("new",))
                await accounts.ready()
                proxy.cut_after = lambda line: b'"t":"acct:' in line
                result = await writer.batch([kvod.ops.set("n", 1, of="acct:a"), kvod.ops.set("n", 1, of="acct:b")])
                first = await next_change(accounts)
                second = await next_change(accounts)
                assert {first.object, second.object} == {"acct:a", "acct:b"}
                assert first.rev == second.rev == result.rev and watcher.reconnections == 1
                await writer.set("n", 2, of="acct:a")
                assert ((await next_change(accounts)).object, watcher.reconnections) == ("acct:a", 1)
                await assert_nothing_more(accounts)
        finally:
            proxy.close()

    run(scenario())
