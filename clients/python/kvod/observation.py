"""One observation: an async iterator of `Change`s that survives reconnections, exactly once and in order.

Owned by its `Client`, and used on the client's event loop only (no threads).

Where it resumes. kvod numbers every change with a global revision, and an `observe` with `sinceRev: R` replays
every change after R (docs/protocol.md "Resuming"). Several events can share a revision: a batch touching several
objects of a pattern, a prior notification and its change. So the observation remembers the revision of the last
event it delivered (`rev`) and which events of that revision it delivered; a revision is known to be complete when
a later one arrives, or, for an observation of one object and key path, with its one non-prior event. A
reconnection resumes from `rev` when it is complete and from `rev - 1` otherwise, and the events of `rev` that
come again are skipped: a client cut between two events of one revision gets the rest of it, none twice.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any, Deque, Dict, Optional, Sequence, Set, Tuple

from .change import Change, decode_change
from .errors import ConnectionLostError, KvodError

if TYPE_CHECKING:
    from .client import Client

_EventKey = Tuple[Optional[str], str, bool, int]


class Observation:
    """What `Client.observe` returns. Iterate it (`async for change in observation`), or `await
    observation.ready()` for the `observe` reply (it raises kvod's refusal). The iteration ends after a
    `sourceDeleted` or `forbidden` change (kvod ended the subscription), `cancel()` or the client's `close()`,
    and raises the error that ended it otherwise (a refused `observe`, or `ConnectionLostError` when the client
    does not reconnect). Changes wait in memory until taken."""

    def __init__(self, client: "Client", *, object: Optional[str], pattern: Optional[str], key_path: Optional[str],
                 where: Optional[str], options: Sequence[str], since_rev: Optional[int]) -> None:
        self._client = client
        self.object = object
        self.pattern = pattern
        self.key_path = key_path
        self.where = where
        self.options = list(options)
        self.sub: Optional[int] = None
        #: The revision of the last change delivered (the `observe` reply's before any): where it resumes.
        self.rev: Optional[int] = since_rev
        self._rev_complete = True
        self._seen: Set[_EventKey] = set()
        self.ended = False
        self._error: Optional[BaseException] = None
        self._buffer: Deque[Change] = deque()
        self._waiter: Optional["asyncio.Future[None]"] = None
        self._ready: "asyncio.Future[Observation]" = asyncio.get_running_loop().create_future()
        self._ready.add_done_callback(lambda future: future.exception() if not future.cancelled() else None)
        self._task: Optional["asyncio.Task[None]"] = None
        self._attached = False

    # ---- The consumer's side ------------------------------------------------------------------------------

    async def ready(self) -> "Observation":
        """Waits for the `observe` reply; raises its error (`NotFoundError`, `BadRequestError`, ...)."""
        return await asyncio.shield(self._ready)

    def __aiter__(self) -> "Observation":
        return self

    async def __anext__(self) -> Change:
        while True:
            if self._buffer:
                return self._buffer.popleft()
            if self.ended:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def cancel(self) -> None:
        """Ends the observation (an `unobserve` when it is live); harmless twice."""
        if self.ended:
            return
        sub = self.sub
        self._finish(None)
        if sub is not None and self._client.state == "open":
            try:
                await self._client.request("unobserve", {"sub": sub})
            except KvodError:
                pass

    async def __aenter__(self) -> "Observation":
        return await self.ready()

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.cancel()

    # ---- The client's side ----------------------------------------------------------------------------------

    def _params(self, since_rev: Optional[int]) -> Dict[str, Any]:
        params: Dict[str, Any] = {"pattern": self.pattern} if self.pattern is not None else {"object": self.object}
        if self.key_path is not None:
            params["keyPath"] = self.key_path
        if self.where is not None:
            params["where"] = self.where
        params["options"] = self.options if since_rev is None else [o for o in self.options if o != "initial"]
        if since_rev is not None:
            params["sinceRev"] = since_rev
        return params

    def _resume_point(self) -> Optional[int]:
        if self.rev is None:
            return None
        return self.rev if self._rev_complete else self.rev - 1

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._first_observe())

    async def _first_observe(self) -> None:
        while not self.ended:
            try:
                await self._client.request("observe", self._params(self._resume_point()), on_reply=self._attach)
            except ConnectionLostError as error:
                if self._client.reconnecting:
                    continue  # an observe that got no answer made nothing: ask again once reconnected
                self._finish(error)
                return
            except KvodError as error:
                self._finish(error)
                return
            if self.ended and self.sub is not None:
                await self.cancel()
            elif not self._ready.done():
                self._ready.set_result(self)
            return

    async def _resume(self) -> None:
        """After a reconnection (called by the client during its handshake): observe again where it stopped."""
        if self.ended or not self._attached:
            return  # an observe never answered is asked again by _first_observe
        try:
            await self._client.request_now("observe", self._params(self._resume_point()), on_reply=self._attach)
        except ConnectionLostError:
            raise
        except KvodError as error:
            self._finish(error)  # the object is gone, or no longer readable: the iteration ends with the reason

    def _attach(self, reply: Dict[str, Any]) -> None:
        """The `observe` reply, handled before the next line is read (its events may follow in the same read)."""
        if self.ended:
            return
        self.sub = int(reply["sub"])
        self._attached = True
        if self.rev is None:
            self.rev = int(reply["rev"])
            self._rev_complete = True
        self._client._register(self.sub, self)

    def _detach(self) -> None:
        if self.sub is not None:
            self._client._unregister(self.sub)
            self.sub = None

    def _deliver(self, message: Dict[str, Any]) -> None:
        change = decode_change(message, self.object, self.key_path, self.pattern is not None and self.key_path is None)
        if change.reason == "signal":
            self._push(change)  # a signal changes nothing: where to resume stays where the changes left it
            return
        if change.reason in ("initial", "resync"):
            # The state as it is now (kvod sends it once, never replayed): where the replay of changes starts.
            # Also when its revision is below the one asked for (a data directory wiped: kvod starts again at 0).
            self.rev, self._rev_complete, self._seen = change.rev, True, set()
            self._push(change)
            return
        key: _EventKey = (change.object, change.reason, change.is_prior, change.kind)
        if self.rev is not None and change.rev <= self.rev:
            if change.rev < self.rev or self._rev_complete or key in self._seen:
                return  # delivered before the reconnection
            self._seen.add(key)
        else:
            self.rev, self._rev_complete, self._seen = change.rev, False, {key}
        if self.pattern is None and not change.is_prior:
            self._rev_complete = True  # one object and key path: one change per revision
        self._push(change)
        if change.is_prior:
            return
        if (change.reason == "sourceDeleted" and self.pattern is None) or change.reason == "forbidden":
            self._finish(None)

    def _push(self, change: Change) -> None:
        self._buffer.append(change)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _finish(self, error: Optional[BaseException]) -> None:
        if self.ended:
            return
        self.ended = True
        self._error = error
        self._detach()
        self._client._forget(self)
        if not self._ready.done():
            if error is not None:
                self._ready.set_exception(error)
            else:
                self._ready.set_result(self)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
