"""Errors: kvod's error replies and the client's own failures, as exceptions carrying kvod's `code`.

Every error is a `KvodError` with `.code` (the protocol's error code, docs/protocol.md "Requests and replies", or
one of the client's own: `connection_lost`, `closed`, `not_announced`, `protocol`), `.message` and `.details`
(the error object's other members: `part`, `rev`, `value`, `field`, `limit`, ...). A few codes have a subclass,
so that `except kvod.ConflictError` reads well; any other code is a plain `KvodError`.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Type


class KvodError(Exception):
    """An error reply from kvod, or a failure of the client (see the module's docstring for the codes)."""

    def __init__(self, code: str, message: str, details: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details: Dict[str, Any] = dict(details or {})

    @staticmethod
    def from_reply(error: Any) -> "KvodError":
        """The exception for a reply's `error` object (its class chosen by `code`)."""
        if not isinstance(error, dict):
            return ProtocolError("protocol", f"a failed reply without an error object: {error!r}")
        details = {key: value for key, value in error.items() if key not in ("code", "message")}
        code = str(error.get("code", "protocol"))
        message = str(error.get("message", "request failed"))
        return _BY_CODE.get(code, KvodError)(code, message, details)


class BadRequestError(KvodError):
    """`bad_request`: the request was malformed (a field kvod does not take names `details["field"]`)."""


class NotFoundError(KvodError):
    """`not_found`: the object (or a session) does not exist."""


class ExistsError(KvodError):
    """`exists`: `create` of an object that exists."""


class ConflictError(KvodError):
    """`conflict`: a condition (`ifRev`, `ifAbsent`, `ifExists`, `ifEquals`) did not hold; `details` says which
    (`condition`) and what is there now (`rev`, and `value`, `changedRev` or `exists`)."""


class ForbiddenError(KvodError):
    """`forbidden`: the user lacks a permission (`details["object"]`, `details["permission"]`)."""


class UnauthenticatedError(KvodError):
    """`unauthenticated`: wrong credentials, or a request before a login on a server with users."""


class ConnectionLostError(KvodError):
    """`connection_lost` (client side): the connection dropped before the reply came. The request may or may
    not have been applied; it is never retried by the client."""


class ClosedError(KvodError):
    """`closed`: the client was closed (client side), or a server admin closed the connection (kvod's `closed`)."""


class ProtocolError(KvodError):
    """`protocol` (client side): kvod sent something this client cannot read."""


class NotAnnouncedError(KvodError):
    """`not_announced` (client side): the request needs a protocol feature the server did not announce in
    `hello`'s `features`; it was not sent (kvod refuses fields it does not know, so nothing is weakened)."""


_BY_CODE: Dict[str, Type[KvodError]] = {
    "bad_request": BadRequestError,
    "not_found": NotFoundError,
    "exists": ExistsError,
    "conflict": ConflictError,
    "forbidden": ForbiddenError,
    "unauthenticated": UnauthenticatedError,
    "connection_lost": ConnectionLostError,
    "closed": ClosedError,
    "protocol": ProtocolError,
    "not_announced": NotAnnouncedError,
}
