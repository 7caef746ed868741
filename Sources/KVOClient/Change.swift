import KVOJSON

/// One change delivered by an observation (docs/protocol.md, "Events"), with its values decoded as
/// `Value`. A value; any thread.
///
/// Decoding failures: when `old` or `new` does not decode as `Value`, the change is still delivered,
/// with `decodingError` set, `old`/`new` nil where decoding failed, and the JSON as received in `rawOld`
/// and `rawNew`; the observation and all others go on. (Throwing from the sequence would end it, and one
/// bad value written by another client would then cost every observer its subscription.)
public struct Change<Value: Sendable>: Sendable {
    /// Why the change was sent.
    public typealias Reason = ChangeReason
    /// Cocoa's change kinds.
    public typealias Kind = ChangeKind

    /// Why the change was sent.
    public let reason: Reason
    /// The kind of change.
    public let kind: Kind
    /// The value before the change, when asked for with `.old` and decodable.
    public let old: Value?
    /// The value after the change, when asked for with `.new` (or on `resync`) and decodable.
    public let new: Value?
    /// The affected array indexes for insertions, removals and replacements, ascending; empty otherwise.
    public let indexes: [Int]
    /// True for a prior notification (sent before the change with `.prior`).
    public let isPrior: Bool
    /// The revision of the write that caused the change (for `initial` and `resync`, the current one).
    public let rev: Int64
    /// The observed object. For a pattern observation, the object the change is about (each event names
    /// it); the pattern itself for an id set's `initial` and `resync` changes, whose `new` lists the ids.
    public let object: String
    /// The observed key path (empty for an id-set pattern observation).
    public let keyPath: String
    /// `old` as received (nil when absent).
    public let rawOld: JSONValue?
    /// `new` as received (nil when absent).
    public let rawNew: JSONValue?
    /// Why `old` or `new` could not be decoded as `Value`; nil when both decoded (or were absent).
    public let decodingError: KVODError?
    /// The server's subscription id for this observation on the connection where it was first made (the
    /// first `observe` reply's `sub`). The server numbers subscriptions anew on every connection; this one
    /// stays with the observation across reconnections, so it names the same observation throughout (what
    /// `kvoclient subscribe --json` prints as `sub`). Nil only in changes made by hand.
    public let sub: Int64?
    /// The event's `change` dictionary (`kind`, `old`, `new`, `indexes`, `notificationIsPrior`), for code
    /// that shows or forwards events in the protocol's full form: as received from a full-encoding event
    /// (with any member a newer server adds); for a compact event, the full form's dictionary rebuilt member
    /// by member (the two encodings correspond exactly: docs/protocol.md, "Compact events"). Nil only in
    /// changes made by hand without one.
    public var rawChange: JSONValue? {
        if let receivedChange { return receivedChange }
        guard sub != nil else { return nil }
        var dictionary: [String: JSONValue] = ["kind": .int(Int64(kind.rawValue))]
        if kind != .setting { dictionary["indexes"] = .array(indexes.map { .int(Int64($0)) }) }
        if let rawNew { dictionary["new"] = rawNew }
        if let rawOld { dictionary["old"] = rawOld }
        if isPrior { dictionary["notificationIsPrior"] = true }
        return .object(dictionary)
    }
    /// The `change` dictionary of a full-encoding event, as received.
    private let receivedChange: JSONValue?
    /// What the observation's buffering policy did before this change (`ObservationBuffering`): changes
    /// dropped or coalesced unread, or a pause resumed from kvod's history. Nil when the change follows the
    /// previous one delivered with nothing in between left out or paused.
    public let gap: ChangeGap?
    /// Why the object went, beyond `reason`: `"expired"` on the `sourceDeleted` (or live query `left`) of an
    /// object whose time to live ended (docs/protocol.md, "Expiry"); nil otherwise.
    public let cause: String?

    /// Makes a change (for tests and adapters; the client makes them from events).
    public init(reason: Reason, kind: Kind, old: Value?, new: Value?, indexes: [Int], isPrior: Bool, rev: Int64,
                object: String, keyPath: String, rawOld: JSONValue?, rawNew: JSONValue?, decodingError: KVODError?,
                sub: Int64? = nil, rawChange: JSONValue? = nil, gap: ChangeGap? = nil, cause: String? = nil) {
        self.reason = reason
        self.kind = kind
        self.old = old
        self.new = new
        self.indexes = indexes
        self.isPrior = isPrior
        self.rev = rev
        self.object = object
        self.keyPath = keyPath
        self.rawOld = rawOld
        self.rawNew = rawNew
        self.decodingError = decodingError
        self.sub = sub
        self.receivedChange = rawChange
        self.gap = gap
        self.cause = cause
    }
}

extension Change: Equatable where Value: Equatable {
    /// Compares what the change says; `sub`, `rawChange` and the decoding error's text are left out.
    public static func == (lhs: Change, rhs: Change) -> Bool {
        lhs.reason == rhs.reason && lhs.kind == rhs.kind && lhs.old == rhs.old && lhs.new == rhs.new
            && lhs.indexes == rhs.indexes && lhs.isPrior == rhs.isPrior && lhs.rev == rhs.rev
            && lhs.object == rhs.object && lhs.keyPath == rhs.keyPath && lhs.rawOld == rhs.rawOld
            && lhs.rawNew == rhs.rawNew && (lhs.decodingError == nil) == (rhs.decodingError == nil)
            && lhs.gap == rhs.gap
    }
}

/// Why a change was sent (docs/protocol.md, "Events").
public enum ChangeReason: Sendable, Hashable {
    /// The current value, right after subscribing with `.initial`.
    case initial
    /// The value at the key path changed.
    case valueChanged
    /// A reference on the key path was re-pointed, or a referenced object created or deleted.
    case pathChanged
    /// The observed object was deleted: the observation's last change.
    case sourceDeleted
    /// The key path now passes through an object the user may not read: the last change, no value.
    case forbidden
    /// History did not reach back to where the client resumed: `new` is the current value (always,
    /// whatever the options); changes in between were missed.
    case resync
    /// An object matching a pattern observation's pattern was created (pattern observations only).
    case created
    /// An object entered a live query's set (`observe(pattern:where:)`): the filter now holds on it.
    case entered
    /// An object left a live query's set: the filter no longer holds on it, or it was deleted.
    case left
    /// A `signal` sent to the observed object (`KVOClient.signal`): `rawNew` is the sender's payload (`new` is it
    /// decoded as `Value`, when it decodes), `object` the object it was sent to, `keyPath` empty and `rev` the
    /// server's revision then. Nothing changed: a signal is no value of the key path.
    case signal
    /// A reason this client does not know, as sent.
    case other(String)

    init(wireName: String) {
        switch wireName {
        case "initial": self = .initial
        case "valueChanged": self = .valueChanged
        case "pathChanged": self = .pathChanged
        case "sourceDeleted": self = .sourceDeleted
        case "forbidden": self = .forbidden
        case "resync": self = .resync
        case "created": self = .created
        case "entered": self = .entered
        case "left": self = .left
        case "signal": self = .signal
        default: self = .other(wireName)
        }
    }

    /// The reason of a compact event's `w` (or of a prior notification's `p`, docs/protocol.md "Compact
    /// events"): the reason's one-letter code. A name that is not one of the codes is read as a full name
    /// (so a server that sends names is understood), and anything else is `other`, as sent.
    init(compactCode code: String) {
        switch code {
        case "i": self = .initial
        case "v": self = .valueChanged
        case "p": self = .pathChanged
        case "s": self = .sourceDeleted
        case "f": self = .forbidden
        case "r": self = .resync
        case "c": self = .created
        case "e": self = .entered
        case "l": self = .left
        case "g": self = .signal
        default: self.init(wireName: code)
        }
    }

    /// The reason's name on the wire (`valueChanged`, `sourceDeleted`, …; `other` as sent).
    public var wireName: String {
        switch self {
        case .initial: "initial"
        case .valueChanged: "valueChanged"
        case .pathChanged: "pathChanged"
        case .sourceDeleted: "sourceDeleted"
        case .forbidden: "forbidden"
        case .resync: "resync"
        case .created: "created"
        case .entered: "entered"
        case .left: "left"
        case .signal: "signal"
        case let .other(name): name
        }
    }

    /// True for the reasons after which the server no longer observes (`sourceDeleted`, `forbidden`) an
    /// ordinary observation. A pattern observation goes on after a `sourceDeleted` (one object is gone).
    public var endsObservation: Bool { self == .sourceDeleted || self == .forbidden }
}

/// Cocoa's change kinds, with Apple's raw values.
public enum ChangeKind: Int, Sendable, Hashable {
    /// The value was set (also every change seen through an enclosing object or operator).
    case setting = 1
    /// Elements were inserted at `indexes`; `new` is the inserted elements.
    case insertion = 2
    /// Elements were removed from `indexes`; `old` is the removed elements.
    case removal = 3
    /// Elements at `indexes` were replaced; `old` and `new` are the elements before and after.
    case replacement = 4
}


/// An event as the I/O thread parsed it, before decoding into a `Change`: what an observation buffers.
struct ChangeEvent: Sendable {
    /// Variable for the one rewrite `ObservationCore.deliver` does: a fallback's `initial` delivered as `resync`.
    var reason: ChangeReason
    let kind: Int
    let rev: Int64
    let old: JSONValue?
    let new: JSONValue?
    let indexes: [Int]
    let isPrior: Bool
    /// The `change` dictionary as received.
    let change: JSONValue?
    /// The object the event names (`object`, or compact `t`): a pattern observation's events carry it.
    var object: String? = nil
    /// Why an ending happened beyond its reason (`cause`, or compact `x`): `"expired"`.
    var cause: String? = nil
    /// Set by the observation's buffering policy (`ObservationCore.deliver`).
    var gap: ChangeGap? = nil
}
