import KVOJSON

/// What one write did to one object.
public enum RecordedChange: Equatable, Sendable {
    /// The object was created with this value.
    case created(JSONValue)
    /// The object, which had this value, was deleted.
    case deleted(JSONValue)
    /// The object, which had this value, was deleted because its time to live ended (`expire`): a deletion
    /// whose endings said `"cause":"expired"`, kept apart so that a replay (`sinceRev`) says it again.
    case expired(JSONValue)
    /// The key at `path` went from `old` (nil: the key did not exist) to `new`.
    case set(path: [String], old: JSONValue?, new: JSONValue)
    /// An insertion, removal or replacement in the array at a path.
    case array(ArrayChangeRecord)

    /// The value the object had, when the change deleted it (`deleted` or `expired`); nil otherwise.
    public var deletedValue: JSONValue? {
        switch self {
        case let .deleted(value), let .expired(value): return value
        case .created, .set, .array: return nil
        }
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
