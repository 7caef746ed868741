"""The typed operations of `Client` (a base class of it): reads, writes, batches, presence, observations.

Used on the client's event loop only, as the client. Each write is built by `kvod.ops` (the same dicts a batch
and `on_disconnect` take) and sent by `Client.send`. Conditions are keyword arguments named as the protocol names
them: `ifRev`, `ifAbsent`, `ifExists`, `ifEquals=(keyPath, value)`; one that does not hold raises
`ConflictError`, whose `details` say which and what is there now.
"""
from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import ops
from .errors import ConflictError
from .observation import Observation

if TYPE_CHECKING:
    from .client import BatchResult, Incremented, Session, Value


class Operations:
    """kvod's operations by name. `Client` provides `send` and the connection."""

    session: "Optional[Session]"

    async def send(self, request: Mapping[str, Any], *,
                   on_reply: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
        raise NotImplementedError

    async def request(self, op: str, params: Optional[Mapping[str, Any]] = None, *,
                      on_reply: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
        return await self.send({"op": op, **(params or {})}, on_reply=on_reply)

    async def _write(self, request: Mapping[str, Any]) -> int:
        return int((await self.send(request))["rev"])

    # ---- Reads --------------------------------------------------------------------------------------------

    async def get(self, key_path: Optional[str] = None, *, of: str, at_least_rev: Optional[int] = None) -> Any:
        """The value at `key_path` of object `of` (the whole object without a key path; None for a missing key)."""
        return (await self.read(key_path, of=of, at_least_rev=at_least_rev)).value

    async def read(self, key_path: Optional[str] = None, *, of: str,
                   at_least_rev: Optional[int] = None) -> "Value":
        """As `get`, with the reply's revisions: `Value(value, rev, changed_rev, expires_at)`."""
        from .client import Value
        request: Dict[str, Any] = {"op": "get", "object": of}
        if key_path is not None:
            request["keyPath"] = key_path
        if at_least_rev is not None:
            request["atLeastRev"] = at_least_rev
        reply = await self.send(request)
        return Value(reply.get("value"), int(reply["rev"]), int(reply.get("changedRev", 0)), reply.get("expiresAt"))

    async def list(self, *, limit: Optional[int] = None, after: Optional[str] = None) -> List[str]:
        """Every object id (sorted), fetched `limit` at a time when given."""
        objects: List[str] = []
        while True:
            request: Dict[str, Any] = {"op": "list"}
            if limit is not None:
                request["limit"] = limit
            if after is not None:
                request["after"] = after
            reply = await self.send(request)
            objects.extend(reply["objects"])
            if not reply.get("more") or limit is None or not reply["objects"]:
                return objects
            after = reply["objects"][-1]

    async def info(self, object: str) -> Dict[str, Any]:
        """`info` of `object`: its `observers`."""
        return await self.request("info", {"object": object})

    async def ping(self) -> None:
        await self.request("ping")

    # ---- Writes -------------------------------------------------------------------------------------------

    async def create(self, object: str, values: Optional[Mapping[str, Any]] = None, *, class_: Optional[str] = None,
                     ttl: Optional[float] = None, ephemeral: bool = False, ifRev: Optional[int] = None,
                     ifAbsent: bool = False, ifExists: bool = False, ifEquals: Optional[ops.IfEquals] = None) -> int:
        """Creates `object` with `values`; returns the revision. `ExistsError` when it exists. `ephemeral`
        objects are deleted when the presence session ends (`start_session` first)."""
        return await self._write(ops.create(object, values, class_=class_, ttl=ttl, ephemeral=ephemeral, ifRev=ifRev,
                                            ifAbsent=ifAbsent, ifExists=ifExists, ifEquals=ifEquals))

    async def delete(self, object: str, *, ifRev: Optional[int] = None, ifAbsent: bool = False,
                     ifExists: bool = False, ifEquals: Optional[ops.IfEquals] = None) -> int:
        """Deletes `object`; returns the revision. `NotFoundError` when it does not exist."""
        return await self._write(ops.delete(object, ifRev=ifRev, ifAbsent=ifAbsent, ifExists=ifExists,
                                            ifEquals=ifEquals))

    async def set(self, key_path: str, value: Any, *, of: str, ttl: Optional[float] = None,
                  ifRev: Optional[int] = None, ifAbsent: bool = False, ifExists: bool = False,
                  ifEquals: Optional[ops.IfEquals] = None) -> int:
        """Sets the value at `key_path` of object `of`; returns the revision."""
        return await self._write(ops.set(key_path, value, of=of, ttl=ttl, ifRev=ifRev, ifAbsent=ifAbsent,
                                         ifExists=ifExists, ifEquals=ifEquals))

    async def update(self, key_path: str, transform: Callable[[Any], Any], *, of: str,
                     max_attempts: int = 100) -> Tuple[Any, int]:
        """Read-modify-write without losing a concurrent writer's update (as KVOClient's and kvod.js's `update`):
        reads the value at `key_path` (None for a missing key), sets `transform(value)` with `ifEquals` on what
        was read, and on `conflict` calls `transform` again with the value the conflict reports (after the
        third, with a short random pause and a new read, so that writers in step fall out of step), at most
        `max_attempts` times. Returns `(value, rev)`. `transform` may run more than once; raising from it
        writes nothing."""
        current = await self.get(key_path, of=of)
        attempt = 1
        while True:
            value = transform(current)
            try:
                return value, await self.set(key_path, value, of=of, ifEquals=(key_path, current))
            except ConflictError as error:
                if attempt >= max_attempts or error.details.get("exists") is False or "value" not in error.details:
                    raise
                reported = error.details["value"]
            attempt += 1
            if attempt <= 4:
                current = reported
            else:
                await asyncio.sleep(random.random() * 0.002)
                current = await self.get(key_path, of=of)

    async def increment(self, key_path: str, *, of: str, by: Union[int, float] = 1, ifRev: Optional[int] = None,
                        ifAbsent: bool = False, ifExists: bool = False,
                        ifEquals: Optional[ops.IfEquals] = None) -> "Incremented":
        """Adds `by` to the number at `key_path` atomically; returns `Incremented(value, rev)`."""
        from .client import Incremented
        reply = await self.send(ops.increment(key_path, of=of, by=by, ifRev=ifRev, ifAbsent=ifAbsent,
                                              ifExists=ifExists, ifEquals=ifEquals))
        return Incremented(reply["value"], int(reply["rev"]))

    async def insert(self, key_path: str, values: Sequence[Any], *, of: str, index: Optional[int] = None,
                     ifRev: Optional[int] = None, ifEquals: Optional[ops.IfEquals] = None) -> int:
        return await self._write(ops.insert(key_path, values, of=of, index=index, ifRev=ifRev, ifEquals=ifEquals))

    async def remove(self, key_path: str, indexes: Sequence[int], *, of: str, ifRev: Optional[int] = None,
                     ifEquals: Optional[ops.IfEquals] = None) -> int:
        return await self._write(ops.remove(key_path, indexes, of=of, ifRev=ifRev, ifEquals=ifEquals))

    async def replace(self, key_path: str, index: int, value: Any, *, of: str, ifRev: Optional[int] = None,
                      ifEquals: Optional[ops.IfEquals] = None) -> int:
        return await self._write(ops.replace(key_path, index, value, of=of, ifRev=ifRev, ifEquals=ifEquals))

    async def batch(self, parts: Sequence[Mapping[str, Any]]) -> "BatchResult":
        """Applies `parts` (built by `kvod.ops`, or dicts as the protocol spells them, without `id`) all or
        nothing with one revision. A refused part raises its error with `details["part"]`, its index."""
        from .client import BatchResult
        reply = await self.send({"op": "batch", "ops": [dict(part) for part in parts]})
        return BatchResult(int(reply["rev"]), list(reply.get("results", [])))

    async def touch(self, object: str) -> Optional[int]:
        """Starts `object`'s time to live again; returns its new deadline (ms since 1970), None without a ttl."""
        return (await self.request("touch", {"object": object})).get("expiresAt")

    async def signal(self, object: str, value: Any) -> None:
        """Sends `value` to the observers of `object` (a change of reason `signal`); nothing is stored."""
        await self.request("signal", {"object": object, "value": value})

    # ---- Presence -----------------------------------------------------------------------------------------

    async def start_session(self, grace: Optional[float] = None) -> "Session":
        """Begins this client's presence session (grace in seconds; kvod's default, 10, without one). Every
        reconnection resumes it first, so a drop shorter than the grace runs nothing; when the client is gone
        longer (or `end_session()`), kvod runs the `on_disconnect` writes and deletes the ephemeral objects."""
        from .client import Session
        reply = await self.request("session", {} if grace is None else {"grace": grace})
        self.session = Session(str(reply["session"]), reply["grace"])
        return self.session

    async def on_disconnect(self, request: Mapping[str, Any]) -> int:
        """Registers a write (built by `kvod.ops`, or a `batch` request) to run when the session ends; returns
        its action number."""
        return int((await self.request("onDisconnect", {"request": dict(request)}))["action"])

    async def cancel_on_disconnect(self, action: Optional[int] = None) -> int:
        """Drops the action numbered `action` (every action without one); returns how many went."""
        return int((await self.request("cancelOnDisconnect", {} if action is None else {"action": action}))
                   ["cancelled"])

    async def end_session(self) -> int:
        """Ends the session now: its actions run, its ephemeral objects go; returns how many writes ran."""
        reply = await self.request("endSession")
        self.session = None
        return int(reply["ran"])

    # ---- Observations -------------------------------------------------------------------------------------

    def observe(self, key_path: Optional[str] = None, *, of: Optional[str] = None, pattern: Optional[str] = None,
                where: Optional[str] = None, options: Sequence[str] = ("new",),
                since_rev: Optional[int] = None) -> Observation:
        """Observes `key_path` of object `of`, or of every object whose id matches `pattern` (`"user:*"`; without
        a key path: their creations and deletions), or, with `where`, a live query (only the objects on which
        the expression holds, with `entered` and `left` as they come and go). `options`: some of `new`, `old`,
        `initial`, `prior`. `since_rev` resumes after that revision. Returns an `Observation`: iterate it for
        `Change`s, exactly once and in order, across reconnections."""
        if (of is None) == (pattern is None):
            raise ValueError("observe needs one of of= (an object id) and pattern=")
        if isinstance(options, str):
            raise TypeError("options is a sequence of option names, such as ('new', 'old')")
        observation = Observation(self, object=of, pattern=pattern, key_path=key_path,  # type: ignore[arg-type]
                                  where=where, options=options, since_rev=since_rev)
        self._track(observation)
        observation._start()
        return observation

    def _track(self, observation: Observation) -> None:
        raise NotImplementedError
