"""Request builders: each returns the request object (a dict) a write is on the wire, without `id`.

The client's methods send what these build, and the same dicts are the parts of a `batch` and the `request` of
`on_disconnect`, so a write is spelled one way everywhere:

    await c.batch([kvod.ops.increment("balance", of="alice", by=-30, ifEquals=("balance", 100)),
                   kvod.ops.increment("balance", of="bob", by=30)])

Only the fields given are sent (kvod's requests are strict: a member it does not take is `bad_request`, and `null`
is never "absent"). Conditions are keyword arguments named as the protocol names them (docs/protocol.md
"Conditional writes"): `ifRev=R`, `ifAbsent=True`, `ifExists=True`, `ifEquals=(keyPath, value)` (or a dict
`{"keyPath": …, "value": …}`).
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

Request = Dict[str, Any]
IfEquals = Union[Tuple[str, Any], Mapping[str, Any]]

_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1
_LONG_DIGITS = re.compile(rb"\d{19}")


def _conditions(request: Request, ifRev: Optional[int], ifAbsent: bool, ifExists: bool,
                ifEquals: Optional[IfEquals]) -> Request:
    if ifRev is not None:
        request["ifRev"] = ifRev
    if ifAbsent:
        request["ifAbsent"] = True
    if ifExists:
        request["ifExists"] = True
    if ifEquals is not None:
        if isinstance(ifEquals, Mapping):
            request["ifEquals"] = {"keyPath": ifEquals["keyPath"], "value": ifEquals["value"]}
        else:
            key_path, value = ifEquals
            request["ifEquals"] = {"keyPath": key_path, "value": value}
    return request


def create(object: str, values: Optional[Mapping[str, Any]] = None, *, class_: Optional[str] = None,
           ttl: Optional[float] = None, ephemeral: bool = False, ifRev: Optional[int] = None, ifAbsent: bool = False,
           ifExists: bool = False, ifEquals: Optional[IfEquals] = None) -> Request:
    """`create` of `object` with `values` (default `{}`); `class_` is the protocol's `class`."""
    request: Request = {"op": "create", "object": object}
    if values is not None:
        request["values"] = dict(values)
    if class_ is not None:
        request["class"] = class_
    if ttl is not None:
        request["ttl"] = ttl
    if ephemeral:
        request["ephemeral"] = True
    return _conditions(request, ifRev, ifAbsent, ifExists, ifEquals)


def delete(object: str, *, ifRev: Optional[int] = None, ifAbsent: bool = False, ifExists: bool = False,
           ifEquals: Optional[IfEquals] = None) -> Request:
    """`delete` of `object`."""
    return _conditions({"op": "delete", "object": object}, ifRev, ifAbsent, ifExists, ifEquals)


def set(key_path: str, value: Any, *, of: str, ttl: Optional[float] = None, ifRev: Optional[int] = None,
        ifAbsent: bool = False, ifExists: bool = False, ifEquals: Optional[IfEquals] = None) -> Request:
    """`set` of the value at `key_path` of object `of`."""
    request: Request = {"op": "set", "object": of, "keyPath": key_path, "value": value}
    if ttl is not None:
        request["ttl"] = ttl
    return _conditions(request, ifRev, ifAbsent, ifExists, ifEquals)


def increment(key_path: str, *, of: str, by: Union[int, float] = 1, ifRev: Optional[int] = None,
              ifAbsent: bool = False, ifExists: bool = False, ifEquals: Optional[IfEquals] = None) -> Request:
    """`increment` of the number at `key_path` of object `of` by `by`."""
    request: Request = {"op": "increment", "object": of, "keyPath": key_path, "by": by}
    return _conditions(request, ifRev, ifAbsent, ifExists, ifEquals)


def insert(key_path: str, values: Sequence[Any], *, of: str, index: Optional[int] = None,
           ifRev: Optional[int] = None, ifEquals: Optional[IfEquals] = None) -> Request:
    """`insert` of `values` into the array at `key_path` from `index` (appended without one)."""
    request: Request = {"op": "insert", "object": of, "keyPath": key_path, "values": list(values)}
    if index is not None:
        request["index"] = index
    return _conditions(request, ifRev, False, False, ifEquals)


def remove(key_path: str, indexes: Sequence[int], *, of: str, ifRev: Optional[int] = None,
           ifEquals: Optional[IfEquals] = None) -> Request:
    """`remove` of the elements at `indexes` of the array at `key_path`."""
    request: Request = {"op": "remove", "object": of, "keyPath": key_path, "indexes": list(indexes)}
    return _conditions(request, ifRev, False, False, ifEquals)


def replace(key_path: str, index: int, value: Any, *, of: str, ifRev: Optional[int] = None,
            ifEquals: Optional[IfEquals] = None) -> Request:
    """`replace` of the element at `index` of the array at `key_path` with `value`."""
    request: Request = {"op": "replace", "object": of, "keyPath": key_path, "index": index, "value": value}
    return _conditions(request, ifRev, False, False, ifEquals)


def encode(request: Mapping[str, Any]) -> bytes:
    """A request's line (UTF-8 JSON and `\\n`). Raises ValueError for what kvod would refuse without answering
    the request's `id` (an integer outside 64 bits; kvod keeps integers exact and never rounds), for NaN and
    infinities (not JSON), and TypeError for values JSON has no form for. Dicts keep their insertion order."""
    text = json.dumps(request, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    if _LONG_DIGITS.search(text):
        _check_integers(request)
    return text + b"\n"


def _check_integers(value: Any) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"the integer {value} is outside kvod's 64-bit range (integers are kept exact): "
                             "send a float to send a double")
    elif isinstance(value, Mapping):
        for item in value.values():
            _check_integers(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_integers(item)


# The optional request fields that need a protocol feature announced in hello's `features` (docs/protocol.md
# "Newer clients, older servers"), and the operations that need one.
FEATURE_OF_FIELD = {
    "ttl": "ttl", "ifExists": "conditions", "ifAbsent": "conditions", "ifEquals": "conditions", "ifRev": "conditions",
    "ephemeral": "ephemeral", "where": "liveQueries", "sinceRev": "sinceRev", "atLeastRev": "atLeastRev",
}
FEATURE_OF_OP = {"session": "sessions", "onDisconnect": "sessions", "cancelOnDisconnect": "sessions",
                 "endSession": "sessions", "signal": "signals"}


def unannounced(request: Mapping[str, Any], features: Sequence[str]) -> Optional[str]:
    """The feature `request` needs that `features` lacks (looking into a batch's parts and an onDisconnect's
    request too), or None."""
    op = request.get("op")
    if isinstance(op, str) and op in FEATURE_OF_OP and FEATURE_OF_OP[op] not in features:
        return FEATURE_OF_OP[op]
    for key in request:
        feature = FEATURE_OF_FIELD.get(key)
        if feature is not None and feature not in features:
            return feature
    parts = list(request.get("ops") or []) if isinstance(request.get("ops"), list) else []
    if isinstance(request.get("request"), Mapping):
        parts.append(request["request"])
    for part in parts:
        if isinstance(part, Mapping):
            missing = unannounced(part, features)
            if missing is not None:
                return missing
    return None
