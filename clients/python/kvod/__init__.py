"""kvod: an asyncio client of kvod, the Key-Value Observing server. Standard library only.

    import asyncio, kvod

    async def main():
        async with kvod.connect("127.0.0.1", 7420) as c:
            await c.create("clock", {"date": "2026-11-30"})
            print(await c.get("date", of="clock"))
            async for change in c.observe("date", of="clock", options=("initial", "new")):
                print(change.reason, change.new)

    asyncio.run(main())

docs/python-client.md in the kvod repository is the reference.
"""
from __future__ import annotations

import ssl
from typing import Any, Generator, Optional, Union

from . import ops
from .change import Change
from .client import BatchResult, Client, Incremented, Session, Value
from .errors import (BadRequestError, ClosedError, ConflictError, ConnectionLostError, ExistsError, ForbiddenError,
                     KvodError, NotAnnouncedError, NotFoundError, ProtocolError, UnauthenticatedError)
from .observation import Observation

__all__ = [
    "connect", "Client", "Change", "Observation", "Value", "Incremented", "BatchResult", "Session", "ops",
    "KvodError", "BadRequestError", "NotFoundError", "ExistsError", "ConflictError", "ForbiddenError",
    "UnauthenticatedError", "ConnectionLostError", "ClosedError", "ProtocolError", "NotAnnouncedError",
]
__version__ = "0.1.0"


class _Connecting:
    """What `connect` returns: await it for an open `Client`, or use it as `async with` (closed on exit)."""

    def __init__(self, host: str, port: int, options: Any) -> None:
        self._host, self._port, self._options = host, port, options
        self._client: Optional[Client] = None

    async def _open(self) -> Client:
        self._client = Client(self._host, self._port, **self._options)
        return await self._client._open()

    def __await__(self) -> Generator[Any, None, Client]:
        return self._open().__await__()

    async def __aenter__(self) -> Client:
        return await self._open()

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._client is not None:
            await self._client.close()


def connect(host: str = "127.0.0.1", port: int = 7420, *, user: Optional[str] = None, password: Optional[str] = None,
            token: Optional[str] = None, tls: Union[bool, ssl.SSLContext, None] = None,
            server_hostname: Optional[str] = None, reconnect: bool = True, heartbeat: float = 10.0,
            heartbeat_timeout: float = 10.0, min_delay: float = 0.25, max_delay: float = 10.0,
            connect_timeout: float = 10.0, events: str = "compact", client_name: str = "kvod.py") -> _Connecting:
    """Connects to kvod at `host`:`port` (TCP; TLS with `tls=True`, verified against the system's CAs, or
    `tls=` an `ssl.SSLContext`) and logs in with `user` and `password`, or `token`, when given.

    `reconnect`: reconnect and resume after a drop (backoff from `min_delay` to `max_delay` seconds, jittered).
    `heartbeat`: ping after that many seconds without a byte from the server (0: never), and take the connection
    for lost when nothing arrives within `heartbeat_timeout` of the ping. `events`: `compact` or `full`.
    Raises `ConnectionLostError` when the first connection cannot be made, `UnauthenticatedError` for wrong
    credentials."""
    return _Connecting(host, port, dict(
        user=user, password=password, token=token, tls=tls, server_hostname=server_hostname, reconnect=reconnect,
        heartbeat=heartbeat, heartbeat_timeout=heartbeat_timeout, min_delay=min_delay, max_delay=max_delay,
        connect_timeout=connect_timeout, events=events, client_name=client_name))
