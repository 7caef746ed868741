import CLibUV
import Logging
import KVOEngine
import KVOJSON
import KVOModel

/// Where the server's state lives between runs: the seam between the server and a storage engine, as
/// nats-server's `StreamStore` is between a stream and its `filestore` or `memstore`.
///
/// Two implementations: `SQLiteStore` (`--data DIR`: one SQLite database, group commits, its own WAL
/// upkeep) and `MemoryStore` (`--in-memory`: keeps nothing). The server knows only this protocol and
/// `keepsWrites`; how a store writes, what files it has and how it keeps them in shape (for SQLite, the
/// WAL and its checkpoints) is the store's own business.
///
/// Ownership and threads: made by `ServerStartup` and then owned by the `Server`, which calls every member
/// on its loop thread (the thread that made it, before the loop runs), and closes it after the loop has
/// run dry. A store may do work of its own on the loop's thread pool (`afterCommit(on:)`), on connections
/// or buffers the loop thread does not touch meanwhile. Not Sendable.
///
/// Errors are `StorageError`. When `commit` or `writeUsers` throws, the server asks `assess` what the failure
/// left: out of space (it frees the reserve and tries once more, then refuses writes), a consistent store
/// (it rolls its state back to the last commit and refuses writes), or unknown (it stops, exit 74). Nothing
/// is acknowledged that was not stored (docs/design.md, "When the store cannot write").
protocol Store: AnyObject {
    /// Whether what is committed outlives the process. False (`MemoryStore`): the engine collects no
    /// commit batches, the server never commits and never waits for a commit before it writes output.
    /// The server reads it once, at start-up, and keeps it in a stored `Bool` (the hot path reads that).
    var keepsWrites: Bool { get }

    /// Everything stored, read once at start-up before the loop serves. Throws `.corrupt` naming a damaged
    /// row.
    func restore() throws(StorageError) -> StoreContents

    /// Cluster mode: marks the stored state as that of stream `name` (`StoreContents.clusterStream` from
    /// then on), so that it is never started alone or as a node of another stream.
    func recordClusterStream(_ name: String) throws(StorageError)

    /// Group commit: stores one batch (everything the engine accepted in one loop iteration, and in cluster
    /// mode the stream sequence and users it covers) at once, or nothing of it.
    func commit(_ batch: CommitBatch) throws(StorageError)

    /// Upkeep after a successful `commit`, on the loop thread: a store may start background work on
    /// `loop`'s thread pool or do some at once. What the server should log about it, if anything; a store
    /// limits how often it says the same thing.
    func afterCommit(on loop: UnsafeMutablePointer<uv_loop_t>) -> StoreNotice?

    /// Single mode: stores `upserting` (by name) and deletes `deleting`, at once, outside any group commit.
    func writeUsers(upserting: [UserRecord], deleting: [String]) throws(StorageError)

    /// Cluster mode, a node installing a snapshot: replaces everything stored by `state` (and `sessions`, the replicated presence
    /// sessions' records by id, when given) and records
    /// `streamSequence` as applied (and `users`, when given, as the users), at once or not at all.
    /// `streamIntegrity`: what the node knows of the stream at that sequence (`StreamIntegrity`'s state, encoded).
    func replaceAll(with state: PersistedState, streamSequence: UInt64, streamIntegrity: [UInt8]?,
                    users: [UserRecord]?, sessions: [String: JSONValue]?) throws(StorageError)

    /// What a failed `commit` or `writeUsers` left (`StorageFailure`).
    func assess(_ error: StorageError) -> StorageFailure

    /// Out of space: gives back the space the store holds in reserve, so that the failed commit can be
    /// tried once more. Whether any was freed.
    func releaseReserve() -> Bool

    /// While the server refuses writes: throws unless writes can be taken again (the reserve made again, a
    /// probe write stored).
    func probeWritable() throws(StorageError)

    /// Nil while the store's files are where it writes them; otherwise why not (deleted, replaced). Cheap
    /// (a `stat`): the server asks before each commit and every second.
    func filesProblem() -> String?

    /// The bytes the store's files take on disk, for `--max-disk` (0 for a store without files).
    func bytesOnDisk() -> Int

    /// Problems the store found and mended while opening (files others could read), one line each, for
    /// the server to log as warnings.
    var openingNotes: [String] { get }

    /// What `close()` did about the store's files that the server should log as warnings, one line each (the
    /// write-ahead log of a deleted or replaced database file set aside); empty before `close()`.
    var closingNotes: [String] { get }

    /// What the server's "restored" log line says of the store (e.g. its file and sync mode).
    var logMetadata: Logger.Metadata { get }

    /// The sizes of the store's files and the room left on their file system (`StorageUsage`), read when
    /// `/metrics` is scraped; nil for a store without files (`MemoryStore`).
    func usage() -> StorageUsage?

    /// The database file a backup copies and the temporary file the server's `backup` writes its copy to (in the data
    /// directory, removed when the transfer ends); nil for a store without files (`MemoryStore`): nothing to back up.
    var backupFiles: (database: String, partial: String)? { get }

    /// The database's pages (`StorePages`: free ones, and whether they can be given back); nil for a store without
    /// files, or when they cannot be read.
    func pages() -> StorePages?

    /// One bounded step of giving free pages back (`SQLiteStore+Vacuum`): at most `pages` of them. Between loop
    /// turns, never inside a commit.
    func reclaimSpace(pages: Int) throws(StorageError) -> StorePages

    /// After reclaiming: the write-ahead log copied into the database and truncated, so that the file shrinks now.
    /// Whether it was.
    func shrinkLog() -> Bool

    /// Ends the store's background work and releases what it holds (files, locks). Idempotent; later
    /// calls of the rest throw `.closed` (or return nothing).
    func close()
}

/// What `Store.restore()` reads back.
struct StoreContents {
    /// Objects, revision, history, classes, bindings and the binding id counter.
    var state: PersistedState
    var users: UserDirectory
    /// Cluster mode: the stream the stored state belongs to (`recordClusterStream`); nil for one no
    /// cluster node used.
    var clusterStream: String?
    /// Cluster mode: the last stream sequence whose writes are stored (0: none).
    var streamSequence: UInt64
    /// Cluster mode: `StreamIntegrity`'s state at `streamSequence`, encoded (nil: none stored).
    var streamIntegrity: [UInt8]? = nil
    /// The sessions (`PresenceSession`) the last run left, with their pending actions.
    var sessions: [PresenceSession] = []
}

/// A line a store's upkeep wants logged (`Store.afterCommit(on:)`).
struct StoreNotice: Equatable {
    let level: Logger.Level
    let message: String
}
