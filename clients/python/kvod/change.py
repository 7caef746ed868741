"""Change events, full or compact encoding (docs/protocol.md "Events", "Compact events"), as one dataclass."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

# Compact events' reason codes (`w`, and a prior notification's `p`).
COMPACT_REASONS = {
    "i": "initial", "v": "valueChanged", "p": "pathChanged", "s": "sourceDeleted", "f": "forbidden", "r": "resync",
    "c": "created", "e": "entered", "l": "left", "g": "signal",
}


@dataclass(frozen=True)
class Change:
    """One change an observation delivered.

    `reason` is kvod's (`initial`, `valueChanged`, `pathChanged`, `sourceDeleted`, `forbidden`, `resync`,
    `created`, `entered`, `left`, `signal`, or a newer server's, as sent). `new` and `old` are the values
    (`None` both for JSON null and when not sent: `has_new` and `has_old` tell them apart). `kind` is Cocoa's
    (1 setting, 2 insertion, 3 removal, 4 replacement) with `indexes` for 2-4. `object` names the object (a
    pattern's events name theirs; an id set's `initial` and `resync` name none and list the ids in `ids`).
    `rev` is the revision of the change (a signal's: the revision current when it was sent).
    """

    reason: str
    rev: int
    sub: int
    object: Optional[str] = None
    key_path: Optional[str] = None
    kind: int = 1
    new: Any = None
    old: Any = None
    has_new: bool = False
    has_old: bool = False
    indexes: Optional[List[int]] = None
    is_prior: bool = False
    cause: Optional[str] = None
    ids: Optional[List[str]] = None


def decode_change(message: Mapping[str, Any], object: Optional[str], key_path: Optional[str],
                  id_set: bool) -> Change:
    """The change `message` (a full or compact event) carries, for an observation of `object` (None for a
    pattern) and `key_path`; `id_set` for a pattern observation without a key path."""
    fields: Dict[str, Any]
    if message.get("event") == "change":
        change = message.get("change") or {}
        reason = str(message.get("reason"))
        fields = dict(
            reason=reason, rev=int(message["rev"]), sub=int(message["sub"]), object=message.get("object"),
            key_path=message.get("keyPath"), kind=int(change.get("kind", 1)),
            is_prior=change.get("notificationIsPrior") is True, indexes=change.get("indexes"),
            cause=message.get("cause"))
        has_new, has_old = "new" in change, "old" in change
        new, old = change.get("new"), change.get("old")
    else:
        prior = "p" in message
        code = message["p"] if prior and isinstance(message["p"], str) else message.get("w")
        reason = "valueChanged" if code is None else COMPACT_REASONS.get(code, code)
        kind = next((k for k in (2, 3, 4) if isinstance(message.get(str(k)), list)), 1)
        fields = dict(
            reason=reason, rev=int(message["r"]), sub=int(message["s"]), object=message.get("t", object),
            key_path=None if code == "g" else key_path, kind=kind, is_prior=prior,
            indexes=message[str(kind)] if kind != 1 else None, cause="expired" if message.get("x") == 1 else None)
        has_new, has_old = "n" in message, "o" in message
        new, old = message.get("n"), message.get("o")
    ids = new if id_set and reason in ("initial", "resync") and isinstance(new, list) else None
    return Change(new=new, old=old, has_new=has_new, has_old=has_old, ids=ids, **fields)
