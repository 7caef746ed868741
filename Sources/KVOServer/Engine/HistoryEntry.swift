import KVOJSON

/// One accepted write, as history keeps it: which object it changed, the object's value after it,
/// and (for `insert`/`remove`/`replace`) the to-many change, so that a replay can report kinds 2-4.
///
/// History entries are what `observe` with `sinceRev` replays and what the persistent store logs.
/// A value type; any thread (the store's writer encodes them).
public struct HistoryEntry: Equatable, Sendable {
    /// The revision this write created.
    public let rev: UInt64
    /// The object written (after following references: the object whose value changed).
    public let object: String
    /// The object's whole value after the write; nil when the write deleted it.
    public let value: JSONValue?
    /// For a collection mutation: where the array is (a path inside `object`) and what changed.
    public let arrayChange: ArrayChangeRecord?

    public init(rev: UInt64, object: String, value: JSONValue?, arrayChange: ArrayChangeRecord?) {
        self.rev = rev
        self.object = object
        self.value = value
        self.arrayChange = arrayChange
    }
}

/// A collection mutation as history records it.
public struct ArrayChangeRecord: Equatable, Sendable {
    /// The array's key path inside the object (array indexes as keys).
    public let path: [String]
    public let kind: ChangeKind
    public let indexes: [Int]
    /// Removed or replaced elements (empty for insertions).
    public let old: [JSONValue]
    /// Inserted or new elements (empty for removals).
    public let new: [JSONValue]

    public init(path: [String], kind: ChangeKind, indexes: [Int], old: [JSONValue], new: [JSONValue]) {
        self.path = path
        self.kind = kind
        self.indexes = indexes
        self.old = old
        self.new = new
    }
}

/// What the server needs to persist after a group of writes: everything accepted since the last
/// batch. Built by the engine (`KVOEngine.takeCommitBatch()`), written by the persistent store in
/// one transaction.
public struct CommitBatch: Sendable {
    /// The revision after the last write of the batch.
    public var revision: UInt64
    /// The accepted writes, in revision order (one per revision).
    public var entries: [HistoryEntry]

    public init(revision: UInt64, entries: [HistoryEntry]) {
        self.revision = revision
        self.entries = entries
    }

    public var isEmpty: Bool { entries.isEmpty }
}

/// The state a server starts from: every object, the revision counter, and the most recent history
/// (oldest first).
public struct PersistedState: Sendable {
    public var objects: [String: JSONValue]
    public var revision: UInt64
    public var history: [HistoryEntry]

    public init(objects: [String: JSONValue] = [:], revision: UInt64 = 0, history: [HistoryEntry] = []) {
        self.objects = objects
        self.revision = revision
        self.history = history
    }
}
