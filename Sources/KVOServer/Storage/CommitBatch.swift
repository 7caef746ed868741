import KVOEngine
import KVOJSON

/// What the server needs to persist after a group of writes: everything accepted since the last
/// batch. Built from the engine's accepted changes (`KVOEngine.takeCommitBatch()`, below) and filled in
/// by the server (users, stream sequence); written by the persistent store in one transaction (objects, history, classes and bindings together, or nothing).
package struct CommitBatch: Sendable {
    /// The revision after the last write of the batch.
    package var revision: UInt64
    /// The accepted writes, in revision order (one per revision).
    package var entries: [HistoryEntry]
    /// The final value of every object the batch touched.
    package var objects: [String: StoredObject]
    /// Classes defined since the last batch: name → canonical definition JSON.
    package var classes: [String: JSONValue]
    /// Bindings created (their definition JSON) or removed (nil) since the last batch, by id.
    ///
    /// Careful: `bindings[id] = nil` removes the key instead of recording a removal. Record one with
    /// `bindings.updateValue(nil, forKey: id)` or `bindings[id] = .some(.none)`.
    package var bindings: [UInt64: JSONValue?]
    /// The highest binding id ever handed out (persisted so that ids are never reused after a restart).
    /// The store keeps the largest value it has seen, so 0 (nothing handed out in this batch) changes nothing.
    package var lastBindingID: UInt64
    /// Cluster mode: the last stream sequence applied by this batch's writes, stored in the same
    /// transaction (nil: unchanged, or not a cluster node).
    package var streamSequence: UInt64? = nil
    /// Cluster mode: what the node knows of the stream up to `streamSequence` (`StreamIntegrity`'s state,
    /// encoded), stored in the same transaction.
    package var streamIntegrity: [UInt8]? = nil
    /// Cluster mode: users changed by the stream entries this batch covers, by name (nil: removed),
    /// stored in the same transaction as `streamSequence`. The server fills it; the engine knows no users.
    /// Same care as `bindings` when recording a removal.
    package var users: [String: UserRecord?] = [:]
    /// Expiries set, moved or removed (nil) by the batch's writes, by object (`KVOEngine+Expiry`).
    package var expiries: [String: Expiry?] = [:]
    /// Sessions made or changed (their record, `PresenceSession.record`) or ended (nil) since the last batch,
    /// by id: node-local state the server fills in (`Server+Presence`). Same care as `bindings` for a removal.
    package var sessions: [String: JSONValue?] = [:]

    package init(revision: UInt64, entries: [HistoryEntry], objects: [String: StoredObject],
                classes: [String: JSONValue] = [:], bindings: [UInt64: JSONValue?] = [:], lastBindingID: UInt64 = 0) {
        self.revision = revision
        self.entries = entries
        self.objects = objects
        self.classes = classes
        self.bindings = bindings
        self.lastBindingID = lastBindingID
    }

    /// True when the batch holds no write, no class, no binding, no user change and no session change.
    package var isEmpty: Bool {
        entries.isEmpty && classes.isEmpty && bindings.isEmpty && users.isEmpty && expiries.isEmpty && sessions.isEmpty
    }

    /// The engine's accepted changes, with no stream sequence and no user change (the server adds those).
    init(_ changes: AcceptedChanges) {
        self.init(revision: changes.revision, entries: changes.entries, objects: changes.objects,
                  classes: changes.classes, bindings: changes.bindings, lastBindingID: changes.lastBindingID)
        expiries = changes.expiries
    }
}

extension KVOEngine {
    /// The writes accepted since the last call, with the final value of every object they touched,
    /// for the persistent store to write in one transaction. Empty when nothing was written.
    package func takeCommitBatch() -> CommitBatch {
        CommitBatch(takeAcceptedChanges())
    }
}
