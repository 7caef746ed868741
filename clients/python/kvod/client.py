"""The client: one connection to kvod (JSON lines over TCP or TLS), kept open across drops.

Owned by the asyncio event loop that opened it; every method must be called on that loop (no threads).

Connection life: `connect()` opens a connection and sends `hello` (asking for compact events), `auth` when
credentials are given, and then the client is `open`. When the connection drops (the server closed it, the
network failed, or the heartbeat found the server silent), requests waiting for a reply fail with
`ConnectionLostError` (never retried: a write may or may not have happened) and the client reconnects with a
jittered exponential backoff: `hello`, `auth`, `session` with `resume` (when a presence session was started),
then every live observation observes again with `sinceRev` (see observation.py), and only then are requests made
meanwhile sent. Wrong credentials end it (`UnauthenticatedError`) instead of retrying.

Heartbeat: after `heartbeat` seconds without a byte from the server the client sends `ping`, and takes the
connection for lost when nothing at all arrives within `heartbeat_timeout` of it. It answers kvod's own
`{"event":"heartbeat"}` (sent to a connection quiet for half of kvod's --idle-timeout) with a `ping`, so an
observer that only listens is not closed as idle.
"""
from __future__ import annotations

import asyncio
import json
import random
import ssl
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from . import ops
from .errors import ClosedError, ConnectionLostError, KvodError, NotAnnouncedError, NotFoundError, ProtocolError
from .errors import UnauthenticatedError
from .observation import Observation
from .operations import Operations

_READ_CHUNK = 1 << 16
_MAX_LINE = 1 << 27  # above anything kvod's output buffer lets through in one line
_Pending = Tuple["asyncio.Future[Dict[str, Any]]", Optional[Callable[[Dict[str, Any]], None]]]


@dataclass(frozen=True)
class Value:
    """A `get`'s whole reply: the value, the current revision, the object's last change, its ttl deadline."""
    value: Any
    rev: int
    changed_rev: int
    expires_at: Optional[int] = None


@dataclass(frozen=True)
class Incremented:
    """An `increment`'s reply: the new value and the write's revision."""
    value: Union[int, float]
    rev: int


@dataclass(frozen=True)
class BatchResult:
    """A `batch`'s reply: its one revision, and each part's result (`{}`, or `{"value": …}` for an increment)."""
    rev: int
    results: List[Dict[str, Any]]


@dataclass(frozen=True)
class Session:
    """A presence session (docs/protocol.md "Presence"): its id (a capability: keep it secret) and grace."""
    id: str
    grace: float


class _Connection:
    """One TCP (or TLS) connection; the client replaces it on every reconnection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, now: float) -> None:
        self.reader = reader
        self.writer = writer
        self.last_received = now
        self.established = False
        self.dropped = False
        self.tasks: List["asyncio.Task[None]"] = []


class Client(Operations):
    """A kvod client. Make it with `kvod.connect(...)` (awaited, or as `async with`)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 7420, *, user: Optional[str] = None,
                 password: Optional[str] = None, token: Optional[str] = None,
                 tls: Union[bool, ssl.SSLContext, None] = None, server_hostname: Optional[str] = None,
                 reconnect: bool = True, heartbeat: float = 10.0, heartbeat_timeout: float = 10.0,
                 min_delay: float = 0.25, max_delay: float = 10.0, connect_timeout: float = 10.0,
                 events: str = "compact", client_name: str = "kvod.py") -> None:
        if token is not None and user is not None:
            raise ValueError("give user and password, or token, not both")
        if user is not None and password is None:
            raise ValueError("a user needs a password")
        self.host, self.port = host, port
        self._credentials: Dict[str, str] = ({"token": token} if token is not None else
                                             {"user": user, "password": password} if user is not None and
                                             password is not None else {})
        self._ssl: Optional[ssl.SSLContext] = (tls if isinstance(tls, ssl.SSLContext) else
                                               ssl.create_default_context() if tls else None)
        self._server_hostname = server_hostname
        self._reconnect, self._heartbeat, self._heartbeat_timeout = reconnect, heartbeat, heartbeat_timeout
        self._min_delay, self._max_delay, self._connect_timeout = min_delay, max_delay, connect_timeout
        self._events, self._client_name = events, client_name
        #: `connecting`, `open`, `reconnecting` or `closed`.
        self.state = "connecting"
        #: Called with the new state on every change.
        self.on_state: Optional[Callable[[str], None]] = None
        #: Called with the session when a reconnection finds that it ended (its actions ran).
        self.on_session_lost: Optional[Callable[[Session], None]] = None
        #: What the server said in `hello`: `server`, `version`, `protocol`, `connection`, `events`, `features`.
        self.server_info: Dict[str, Any] = {}
        self.features: List[str] = []
        #: The user logged in as (None in open mode).
        self.user: Optional[str] = None
        self.session: Optional[Session] = None
        #: How many times the client reconnected (counted once logged in again, before observations resume).
        self.reconnections = 0
        self._conn: Optional[_Connection] = None
        self._next_id = 1
        self._pending: Dict[int, _Pending] = {}
        self._opened = asyncio.Event()
        self._by_sub: Dict[int, Observation] = {}
        self._observations: Set[Observation] = set()
        self._reconnect_task: Optional["asyncio.Task[None]"] = None

    # ---- Opening and closing ------------------------------------------------------------------------------

    async def _open(self) -> "Client":
        try:
            await self._connect_once()
        except BaseException as error:
            self._close_now(None)
            if isinstance(error, (OSError, asyncio.TimeoutError)):
                raise ConnectionLostError("connection_lost", f"cannot connect to {self.host}:{self.port}: {error}")
            raise
        return self

    async def close(self) -> None:
        """Closes the connection for good: waiting requests fail with `ClosedError`, observations end. A presence
        session is not ended (its grace starts, as for any disconnect): call `end_session()` first for that."""
        conn = self._conn
        self._close_now(None)
        if conn is not None:
            try:
                await asyncio.wait_for(conn.writer.wait_closed(), 2)
            except (OSError, asyncio.TimeoutError):
                pass

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    @property
    def reconnecting(self) -> bool:
        return self.state in ("reconnecting", "connecting")

    def _set_state(self, state: str) -> None:
        if self.state == state:
            return
        self.state = state
        if state in ("open", "closed"):
            self._opened.set()
        else:
            self._opened.clear()
        if self.on_state is not None:
            self.on_state(state)

    def _close_now(self, observation_error: Optional[BaseException]) -> None:
        if self.state == "closed":
            return
        self._set_state("closed")
        if self._reconnect_task is not None and self._reconnect_task is not asyncio.current_task():
            self._reconnect_task.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.dropped = True
            for task in conn.tasks:
                if task is not asyncio.current_task():
                    task.cancel()
            conn.writer.close()
        self._fail_pending(ClosedError("closed", "the client was closed"))
        for observation in list(self._observations):
            observation._finish(observation_error)

    # ---- The connection -----------------------------------------------------------------------------------

    async def _connect_once(self) -> None:
        loop = asyncio.get_running_loop()
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            self.host, self.port, ssl=self._ssl, limit=_READ_CHUNK * 4,
            server_hostname=(self._server_hostname or self.host) if self._ssl else None), self._connect_timeout)
        conn = _Connection(reader, writer, loop.time())
        self._conn = conn
        conn.tasks.append(loop.create_task(self._read_loop(conn)))
        try:
            await asyncio.wait_for(self._handshake(), self._connect_timeout)
        except BaseException as error:
            self._drop(conn, ConnectionLostError("connection_lost", f"the handshake failed: {error!r}"))
            raise
        if conn.dropped or self.state == "closed":
            raise ConnectionLostError("connection_lost", "the connection closed during the handshake")
        conn.established = True
        if self._heartbeat > 0:
            conn.tasks.append(loop.create_task(self._heartbeat_loop(conn)))
        self._set_state("open")

    async def _handshake(self) -> None:
        hello = await self.request_now("hello", {"client": self._client_name, "events": self._events})
        self.server_info = hello
        self.features = list(hello.get("features") or [])
        if self._credentials:
            self.user = (await self.request_now("auth", dict(self._credentials))).get("user")
        if self.session is not None:
            # The session goes on before anything else (a request made meanwhile may depend on it).
            try:
                await self.request_now("session", {"resume": self.session.id})
            except NotFoundError:
                lost, self.session = self.session, None
                if self.on_session_lost is not None:
                    self.on_session_lost(lost)
        if self.state == "reconnecting":
            self.reconnections += 1  # counted before the replayed changes arrive
        # Observations resume before requests made meanwhile are sent, so their replayed changes come first.
        await asyncio.gather(*(observation._resume() for observation in list(self._observations)))

    async def _read_loop(self, conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        partial: List[bytes] = []  # the unfinished line's chunks (joined once, when its newline comes)
        partial_size = 0
        error: KvodError = ConnectionLostError("connection_lost", "the server closed the connection")
        try:
            while True:
                chunk = await conn.reader.read(_READ_CHUNK)
                if not chunk:
                    break
                conn.last_received = loop.time()  # any bytes show that the server is there
                if b"\n" not in chunk:
                    partial.append(chunk)
                    partial_size += len(chunk)
                    if partial_size > _MAX_LINE:
                        error = ProtocolError("protocol", f"a line longer than {_MAX_LINE} bytes")
                        break
                    continue
                lines = chunk.split(b"\n")
                if partial:
                    lines[0] = b"".join(partial) + lines[0]
                last = lines.pop()
                partial, partial_size = ([last], len(last)) if last else ([], 0)
                for line in lines:
                    if conn.dropped:
                        return
                    self._receive(conn, line)
        except (OSError, ssl.SSLError) as failure:
            error = ConnectionLostError("connection_lost", f"the connection failed: {failure}")
        except asyncio.CancelledError:
            return
        self._drop(conn, error)

    def _receive(self, conn: _Connection, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if "ok" in message:
            self._reply(message)
            return
        event = message.get("event")
        if event == "heartbeat":
            self._ping_quietly(conn)
            return
        if event == "change":
            sub = message.get("sub")
        elif event is None:
            sub = message.get("s")  # a compact event
        else:
            return  # binding notices and events of a newer server
        observation = self._by_sub.get(sub) if isinstance(sub, int) else None
        if observation is not None:
            observation._deliver(message)

    def _reply(self, message: Dict[str, Any]) -> None:
        request_id = message.get("id")
        if request_id is None:
            # A line kvod could not read (an integer past 64 bits, a line over --max-line) is answered without
            # `id`; replies come in request order, so it is the oldest waiting request's.
            if not self._pending:
                return
            request_id = next(iter(self._pending))
        entry = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if entry is None:
            return
        future, on_reply = entry
        if message.get("ok") is True:
            reply = {key: value for key, value in message.items() if key not in ("id", "ok")}
            if on_reply is not None:
                on_reply(reply)  # an observation registers its sub before the next line is read
            if not future.done():
                future.set_result(reply)
        elif not future.done():
            future.set_exception(KvodError.from_reply(message.get("error")))

    def _drop(self, conn: _Connection, error: KvodError) -> None:
        if conn.dropped:
            return
        conn.dropped = True
        for task in conn.tasks:
            if task is not asyncio.current_task():
                task.cancel()
        conn.writer.transport.abort()
        if self._conn is not conn:
            return
        self._conn = None
        self._fail_pending(error)
        for observation in list(self._observations):
            observation._detach()
        if not conn.established or self.state == "closed":
            return  # a handshake that failed is its caller's to handle
        if not self._reconnect:
            self._close_now(error)
            return
        self._set_state("reconnecting")
        self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        attempt = 0
        while self.state != "closed":
            ceiling = min(self._max_delay, self._min_delay * 2 ** attempt)
            attempt = min(attempt + 1, 30)
            await asyncio.sleep(ceiling / 2 + random.random() * ceiling / 2)  # "equal jitter"
            if self.state == "closed":
                return
            try:
                await self._connect_once()
            except UnauthenticatedError as error:
                self._close_now(error)  # wrong credentials do not get better by retrying
                return
            except (OSError, asyncio.TimeoutError, KvodError):
                continue
            return

    async def _heartbeat_loop(self, conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        while not conn.dropped:
            quiet = loop.time() - conn.last_received
            if quiet < self._heartbeat:
                await asyncio.sleep(self._heartbeat - quiet)
                continue
            sent_at = loop.time()
            self._ping_quietly(conn)
            await asyncio.sleep(self._heartbeat_timeout)
            if conn.last_received < sent_at:
                self._drop(conn, ConnectionLostError(
                    "connection_lost", f"no answer from the server within {self._heartbeat_timeout} s of a ping"))
                return

    def _ping_quietly(self, conn: _Connection) -> None:
        if conn.dropped or self._conn is not conn:
            return
        future = self._send(conn, {"op": "ping"}, None)
        future.add_done_callback(lambda done: done.cancelled() or done.exception())

    def _fail_pending(self, error: KvodError) -> None:
        pending, self._pending = self._pending, {}
        for future, _ in pending.values():
            if not future.done():
                future.set_exception(error)
                future.add_done_callback(lambda done: done.exception())

    # ---- Requests -----------------------------------------------------------------------------------------

    def _send(self, conn: _Connection, request: Mapping[str, Any],
              on_reply: Optional[Callable[[Dict[str, Any]], None]]) -> "asyncio.Future[Dict[str, Any]]":
        request_id = self._next_id
        line = ops.encode({**request, "id": request_id})  # ValueError before anything is sent
        self._next_id += 1
        future: "asyncio.Future[Dict[str, Any]]" = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (future, on_reply)
        conn.writer.write(line)
        return future

    async def send(self, request: Mapping[str, Any], *,
                   on_reply: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
        """Sends `request` (a dict with `op`; the client adds `id`) and returns the reply without `id` and `ok`.
        Waits while the client reconnects. Raises `KvodError` (its subclass for the code) for an error reply,
        `NotAnnouncedError` for a field the server did not announce, `ConnectionLostError` if the connection
        dropped before the reply, `ClosedError` after `close()`."""
        while True:
            if self.state == "closed":
                raise ClosedError("closed", "the client is closed")
            if self.state == "open" and self._conn is not None:
                break
            await self._opened.wait()
        feature = ops.unannounced(request, self.features)
        if feature is not None:
            raise NotAnnouncedError("not_announced", f"the server does not announce the protocol feature "
                                    f"'{feature}' (hello's features): '{request.get('op')}' was not sent",
                                    {"feature": feature})
        conn = self._conn
        future = self._send(conn, request, on_reply)
        try:
            await conn.writer.drain()
        except (OSError, ssl.SSLError):
            pass  # the reader notices the drop and fails the request
        return await future

    async def request_now(self, op: str, params: Mapping[str, Any], *,
                          on_reply: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
        """A request of the handshake, sent before the client counts as open."""
        conn = self._conn
        if conn is None or conn.dropped:
            raise ConnectionLostError("connection_lost", "the connection closed during the handshake")
        return await self._send(conn, {"op": op, **params}, on_reply)

    # ---- Observations' bookkeeping ------------------------------------------------------------------------

    def _track(self, observation: Observation) -> None:
        if self.state == "closed":
            observation._finish(ClosedError("closed", "the client is closed"))
            return
        self._observations.add(observation)

    def _register(self, sub: int, observation: Observation) -> None:
        self._by_sub[sub] = observation

    def _unregister(self, sub: int) -> None:
        self._by_sub.pop(sub, None)

    def _forget(self, observation: Observation) -> None:
        self._observations.discard(observation)
