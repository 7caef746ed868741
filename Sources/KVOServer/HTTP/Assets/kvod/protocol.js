// ---- Errors, request text and change events: the protocol's encoding (kvod/protocol.js) ----------------

/** An error reply from kvod (`code` is the protocol's error code) or a client-side failure
 *  (`connection_lost`, `closed`, `protocol`). `details` holds the error object's other members. */
export class KVODError extends Error {
  constructor(code, message, details = {}) {
    super(message);
    this.name = "KVODError";
    this.code = code;
    this.details = details;
  }
}

/** The optional request fields that need a protocol feature announced in hello's `features`, and its name. */
const FEATURE_OF_FIELD = {
  ttl: "ttl", ifExists: "conditions", ifAbsent: "conditions", ifEquals: "conditions", ifRev: "conditions",
  ephemeral: "ephemeral", where: "liveQueries", sinceRev: "sinceRev", atLeastRev: "atLeastRev",
};

/**
 * A request's JSON text. JSON.stringify writes a number from 2^63 up to 1e21 as an integer literal
 * ("18446744073709552000" for 2**64), which kvod refuses (an integer past 64 bits is kept exact or refused,
 * never rounded); such a number is a double in JavaScript, so it is sent with an exponent, the same double.
 */
function requestText(request) {
  const text = JSON.stringify(request);
  if (!/\d{19}/.test(text)) return text;  // the usual case: no integer literal that long
  const marker = "\u0000kvod-double:";
  const marked = JSON.stringify(request, (key, value) =>
    typeof value === "number" && Number.isInteger(value) && Math.abs(value) >= 2 ** 63 ? marker + value.toExponential() : value);
  return marked.replace(/"\\u0000kvod-double:([^"]+)"/g, "$1");
}

const COMPACT_REASON_DEFAULT = "valueChanged";
/** Compact events' reason codes (`w`, and a prior notification's `p`): docs/protocol.md "Compact events". */
const COMPACT_REASONS = {
  i: "initial", v: "valueChanged", p: "pathChanged", s: "sourceDeleted", f: "forbidden", r: "resync", c: "created", e: "entered", l: "left",
  g: "signal",
};

/** One change event, full or compact encoding, as the same plain object. */
export function decodeChange(message, observation) {
  if (message.event === "change") {
    const change = message.change ?? {};
    const decoded = {
      sub: message.sub, rev: message.rev, object: message.object, keyPath: message.keyPath ?? null,
      reason: message.reason, kind: change.kind ?? 1, isPrior: change.notificationIsPrior === true,
    };
    if ("new" in change) decoded.new = change.new;
    if ("old" in change) decoded.old = change.old;
    if (change.indexes) decoded.indexes = change.indexes;
    if (message.cause !== undefined) decoded.cause = message.cause;
    return withIds(decoded, observation);
  }
  // A prior notification's `p` is 1 (valueChanged) or the reason's code; kinds 2-4 carry their indexes
  // under the member named by the kind. An unknown code passes through as the reason, as sent.
  const code = typeof message.p === "string" ? message.p : message.w;
  const kind = [2, 3, 4].find((k) => Array.isArray(message[k])) ?? 1;
  const decoded = {
    sub: message.s, rev: message.r, object: message.t ?? observation.object,
    keyPath: message.w === "g" ? null : observation.keyPath,   // a signal is sent to an object, not a key path
    reason: code === undefined ? COMPACT_REASON_DEFAULT : COMPACT_REASONS[code] ?? code, kind,
    isPrior: "p" in message,
  };
  if ("n" in message) decoded.new = message.n;
  if ("o" in message) decoded.old = message.o;
  if (message.x === 1) decoded.cause = "expired";
  if (kind !== 1) decoded.indexes = message[kind];
  return withIds(decoded, observation);
}

/** An id set's `initial` and `resync` changes list the matching ids in `new`; they are also `ids`. */
function withIds(change, observation) {
  if (observation.pattern !== null && observation.keyPath === null &&
      (change.reason === "initial" || change.reason === "resync") && Array.isArray(change.new)) {
    change.ids = change.new;
  }
  return change;
}
