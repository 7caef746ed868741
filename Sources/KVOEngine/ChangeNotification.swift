import KVOJSON
import KVOModel

/// Who receives a notification: one observation on one connection.
public struct Recipient: Sendable {
    public let connection: ConnectionID
    public let subscription: SubscriptionID
    public let options: ObservationOptions
}

/// One change to one observed key path, for every observation of that exact key path that must hear
/// of it.
///
/// The engine builds it once per (key path, change), never once per observer, so the protocol layer
/// can encode it once per option variant and share the bytes across recipients. Which of `old` and
/// `new` go on the wire depends on each recipient's options and on `reason`/`isPrior`.
public struct ChangeNotification: Sendable {
    public let object: String
    public let keyPath: String
    public let reason: ChangeReason
    /// The revision of the change (for `initial`, the revision current when observing began).
    public let rev: UInt64
    public let kind: ChangeKind
    /// A prior ("will change") notification.
    public let isPrior: Bool
    /// The value before the change (unused for `initial`). For kinds 2-4: the removed or replaced
    /// elements, as an array. Decoded on each call when held as text (`encodedOld`).
    public var old: JSONValue {
        if let encodedOld { return CanonicalText(trusting: encodedOld).value }
        return decodedOld
    }
    /// The value after the change (unused for prior notifications). For kinds 2-4: the inserted or
    /// new elements, as an array. Decoded on each call when held as text (`newIsText`).
    public var new: JSONValue {
        if newIsText, let encodedNew { return CanonicalText(trusting: encodedNew).value }
        return decodedNew
    }
    /// `old` and `new` when held decoded (`.null` when held as text). Kept as plain `JSONValue`s and byte
    /// arrays rather than as `HeldValue`s: a notification is copied several times on its way to the
    /// connections, and a field of a two-payload enum costs an outlined copy and destroy each time
    /// (measured, docs/performance.md, issue 28).
    private let decodedOld: JSONValue
    private let decodedNew: JSONValue
    /// Whether `new` is held as text only (then `encodedNew` is that text).
    private let newIsText: Bool
    /// `old` and `new` as the engine held them: decoded, or as canonical text after a `set` that kept its
    /// value as text (then `encodedOld`/`encodedNew` are that text, and nothing decodes it to send it).
    package var heldOld: HeldValue {
        if let encodedOld { return .text(CanonicalText(trusting: encodedOld)) }
        return .decoded(decodedOld)
    }
    package var heldNew: HeldValue {
        if newIsText, let encodedNew { return .text(CanonicalText(trusting: encodedNew)) }
        return .decoded(decodedNew)
    }
    /// For kinds 2-4: the affected indexes, ascending.
    public let indexes: [Int]?
    public var recipients: [Recipient]
    /// `new` as `JSONWriter` encodes it, when the write that caused the change already had those bytes
    /// (a `set` whose request carried its value in that form); nil otherwise. `EventEncoder` sends
    /// these bytes instead of encoding `new` again.
    public var encodedNew: [UInt8]?
    /// `old` as `JSONWriter` encodes it, when it is held as text; nil otherwise.
    package let encodedOld: [UInt8]?
    /// A pattern observation's event: the compact encoding names the object too (`"t"`), since its
    /// subscription alone does not. The full encoding always names it.
    public var namesObject = false
    /// False for an id-set pattern observation's `created` and `sourceDeleted` events, which carry no
    /// value (neither `new` nor `old`, whatever the options).
    public var carriesValues = true
    /// A `sourceDeleted` (or a live query's `left`) because the object's time to live ended (`expire`):
    /// the event says `"cause":"expired"`.
    public var expired = false

    public init(object: String, keyPath: String, reason: ChangeReason, rev: UInt64, kind: ChangeKind, isPrior: Bool,
                old: JSONValue, new: JSONValue, indexes: [Int]? = nil, recipients: [Recipient]) {
        self.init(object: object, keyPath: keyPath, reason: reason, rev: rev, kind: kind, isPrior: isPrior,
                  old: old, encodedOld: nil, new: new, newText: nil, encodedNew: nil, indexes: indexes, recipients: recipients)
    }

    /// A notification whose old and new values are held as given (text or decoded); a new value held as
    /// text is also its `encodedNew`, a decoded one has `encodedNew` as given.
    package init(object: String, keyPath: String, reason: ChangeReason, rev: UInt64, kind: ChangeKind, isPrior: Bool,
                 held old: HeldValue, _ new: HeldValue, encodedNew: [UInt8]? = nil, indexes: [Int]? = nil,
                 recipients: [Recipient]) {
        self.init(object: object, keyPath: keyPath, reason: reason, rev: rev, kind: kind, isPrior: isPrior,
                  old: old.text == nil ? old.value : .null, encodedOld: old.text?.bytes,
                  new: new.text == nil ? new.value : .null, newText: new.text?.bytes, encodedNew: encodedNew,
                  indexes: indexes, recipients: recipients)
    }

    /// A notification whose old value is `encodedOld` when given (canonical text; `old` is then `.null`), else
    /// `old`, and whose new value is `newText` when given (also its `encodedNew`; `new` is then `.null`), else
    /// `new`, with `encodedNew` as given.
    package init(object: String, keyPath: String, reason: ChangeReason, rev: UInt64, kind: ChangeKind, isPrior: Bool,
                 old: JSONValue, encodedOld: [UInt8]?, new: JSONValue, newText: [UInt8]?, encodedNew: [UInt8]?,
                 indexes: [Int]? = nil, recipients: [Recipient]) {
        self.object = object
        self.keyPath = keyPath
        self.reason = reason
        self.rev = rev
        self.kind = kind
        self.isPrior = isPrior
        decodedOld = old
        self.encodedOld = encodedOld
        decodedNew = new
        if let newText {
            newIsText = true
            self.encodedNew = newText
        } else {
            newIsText = false
            self.encodedNew = encodedNew
        }
        self.indexes = indexes
        self.recipients = recipients
    }

    /// Whether the change dictionary carries `new` (for a recipient that asked for it).
    @inlinable package var carriesNew: Bool {
        carriesValues && !isPrior && kind != .removal
    }

    /// Whether the change dictionary carries `old` (for a recipient that asked for it).
    @inlinable package var carriesOld: Bool {
        carriesValues && reason != .initial && reason != .resync && kind != .insertion
    }
}
