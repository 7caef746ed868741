import KVOJSON

/// An object's value at the end of a commit batch.
public enum StoredObject: Equatable, Sendable {
    case present(JSONValue)
    case deleted
}

/// What the engine accepted since the last `KVOEngine.takeAcceptedChanges()`: the writes, the final value
/// of every object they touched, and the class and binding definitions. The server makes a `CommitBatch`
/// of it (adding what only the server knows: users, the cluster's stream sequence) for the persistent
/// store to write in one transaction. A value type; any thread.
package struct AcceptedChanges: Sendable {
    /// The revision after the last write.
    public var revision: UInt64
    /// The accepted writes, in revision order (one per revision).
    package var entries: [HistoryEntry]
    /// The final value of every object the writes touched.
    package var objects: [String: StoredObject]
    /// Classes defined since the last call: name → canonical definition JSON.
    public var classes: [String: JSONValue]
    /// Bindings created (their definition JSON) or removed (nil) since the last call, by id.
    package var bindings: [UInt64: JSONValue?]
    /// The highest binding id ever handed out.
    public var lastBindingID: UInt64
    /// Expiries set, moved or removed (nil) since the last call, by object.
    package var expiries: [String: Expiry?] = [:]
}
