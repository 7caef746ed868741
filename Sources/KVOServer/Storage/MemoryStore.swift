import CLibUV
import Logging
import KVOEngine
import KVOJSON
import KVOModel

/// `--in-memory`: the store that keeps nothing. The server's state lives in the engine only and is gone
/// when the process ends; `restore()` always finds an empty state, commits and users writes are accepted
/// and dropped (the server makes none: `keepsWrites` is false, so the engine collects no batches), and a
/// cluster node without a data directory installs its snapshot in the engine alone.
///
/// Users of an in-memory kvod come from `--users FILE`, which the server reads and writes itself
/// (`UsersFile`): a file the operator edits, not the store's.
///
/// Ownership and threads: as every `Store`, the server's, on its loop thread.
final class MemoryStore: Store {
    private var isClosed = false

    init() {}

    var keepsWrites: Bool { false }

    func restore() throws(StorageError) -> StoreContents {
        guard !isClosed else { throw .closed }
        return StoreContents(state: PersistedState(), users: UserDirectory(), clusterStream: nil, streamSequence: 0)
    }

    func recordClusterStream(_ name: String) throws(StorageError) {
        guard !isClosed else { throw .closed }
    }

    func commit(_ batch: CommitBatch) throws(StorageError) {
        guard !isClosed else { throw .closed }
    }

    func afterCommit(on loop: UnsafeMutablePointer<uv_loop_t>) -> StoreNotice? { nil }

    func writeUsers(upserting: [UserRecord], deleting: [String]) throws(StorageError) {
        guard !isClosed else { throw .closed }
    }

    func replaceAll(with state: PersistedState, streamSequence: UInt64, streamIntegrity: [UInt8]?,
                    users: [UserRecord]?, sessions: [String: JSONValue]?) throws(StorageError) {
        guard !isClosed else { throw .closed }
    }

    func assess(_ error: StorageError) -> StorageFailure { .consistent("\(error)") }

    func releaseReserve() -> Bool { false }

    func probeWritable() throws(StorageError) {
        guard !isClosed else { throw .closed }
    }

    func filesProblem() -> String? { nil }

    func bytesOnDisk() -> Int { 0 }

    var openingNotes: [String] { [] }

    var closingNotes: [String] { [] }

    var logMetadata: Logger.Metadata { ["store": "memory"] }

    func usage() -> StorageUsage? { nil }

    var backupFiles: (database: String, partial: String)? { nil }

    func pages() -> StorePages? { nil }

    func reclaimSpace(pages: Int) throws(StorageError) -> StorePages { throw .closed }

    func shrinkLog() -> Bool { false }

    func close() { isClosed = true }
}
