import KVOModel

/// Whether the server's store takes writes, and if not why: the state a failed commit (or a lost data
/// directory) leaves the server in, instead of stopping it (docs/design.md, "When the store cannot write").
///
/// While it is not `.writable` every write is refused at the operations table's door (`Server.handleLine`:
/// `storage_full` or `storage_unavailable`), reads, observations and resumes go on, `/readyz` answers 503
/// with `reason`, `kvod_storage_state` says which, and a cluster node stops applying the stream (it
/// subscribes again once writes are taken). Owned by the `Server`; loop thread only. A value type.
enum StorageHealth: Equatable {
    /// Commits succeed.
    case writable
    /// Out of space: the file system refused a commit (SQLITE_FULL, ENOSPC), or the store's files passed
    /// `--max-disk`. Taken back when the reserve can be made again and a probe write is stored (or, for
    /// `--max-disk`, when the files are below it again): `StorageRecovery`.
    case full(String)
    /// A commit failed for another reason that left the database as the last commit left it (it is
    /// read-only now, locked by another process, cannot open its WAL…). Taken back when a probe write is
    /// stored.
    case failing(String)
    /// The database file was deleted or replaced under the server (its path no longer names the file it
    /// writes): nothing written now would be kept. Only a restart (with the data restored) ends it.
    case lost(String)

    /// One line for `/readyz`, refusals and the log; nil while writable.
    var reason: String? {
        switch self {
        case .writable: return nil
        case let .full(why): return "storage full: \(why)"
        case let .failing(why): return "storage failing: \(why)"
        case let .lost(why): return "storage lost: \(why)"
        }
    }

    /// `kvod_storage_state`: 0 writable, 1 full, 2 failing, 3 lost.
    var gaugeValue: Int {
        switch self {
        case .writable: return 0
        case .full: return 1
        case .failing: return 2
        case .lost: return 3
        }
    }

    /// The error a write gets while the store cannot take it; nil while writable.
    var refusal: KVOError? {
        switch self {
        case .writable:
            return nil
        case let .full(why):
            return KVOError(.storageFull, "the server's storage is full (\(why)): writes are refused until space is freed; reads and observations keep working")
        case let .failing(why):
            return KVOError(.storageUnavailable, "the server cannot store writes (\(why)); reads and observations keep working")
        case let .lost(why):
            return KVOError(.storageUnavailable, "the server's database is gone (\(why)): writes are refused until it is restarted with its data; reads and observations keep working")
        }
    }

    /// `status`'s name for it: writable, full, failing, lost.
    var stateName: String {
        switch self {
        case .writable: "writable"
        case .full: "full"
        case .failing: "failing"
        case .lost: "lost"
        }
    }
}
