import KVOEngine
import KVOModel

/// What one object takes on disk in the persistent store: the bytes of its snapshot (`objects.value`)
/// and of the redo rows written since (`redo.change`), which decide when a commit rewrites the snapshot.
///
/// Also the store's note, during one commit, of what the batch does to the object: whether it gets a
/// new snapshot, or was deleted. Owned by one `SQLiteStore`; the same thread rule (the loop thread).
struct ObjectLog {
    var snapshotBytes: Int
    var redoBytes: Int
    /// The batch deletes the object (its snapshot and redo rows go).
    var isDeleted = false
    /// The batch rewrites the object's snapshot (created or deleted in it, or redo past the snapshot's size).
    var takesSnapshot = false
    /// The store does not know whether the object has redo rows on disk (it was not loaded): a new
    /// snapshot deletes them in any case.
    var hasUnknownRedo = false

    init(snapshotBytes: Int, redoBytes: Int, isDeleted: Bool = false) {
        self.snapshotBytes = snapshotBytes
        self.redoBytes = redoBytes
        self.isDeleted = isDeleted
    }

    /// An object the store has no log of: new since the load (no redo rows), or any object of a store
    /// that was never loaded (rows unknown). Its next write takes a snapshot.
    static func unknown(redoMayExist: Bool) -> ObjectLog {
        var log = ObjectLog(snapshotBytes: 0, redoBytes: 0)
        log.takesSnapshot = true
        log.hasUnknownRedo = redoMayExist
        return log
    }
}
