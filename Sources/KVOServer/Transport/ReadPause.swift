import KVOEngine
import KVOModel

/// Why a connection has stopped reading (`Connection.pauseReading(_:)`). Reading stops while at least
/// one reason holds and starts again when the last one is lifted (`Connection.resumeReading(_:)`), so
/// independent users share one switch without knowing of each other. A value; loop thread only, as
/// the connection.
struct ReadPause: OptionSet, Sendable {
    let rawValue: UInt8

    init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// The connection has `--max-pending-requests` replies not yet written to its socket, or half its
    /// `--max-output-buffer` queued, after a reply (a client pipelining requests without reading the
    /// replies): lifted once its output drains below both.
    static let backPressure = ReadPause(rawValue: 1 << 0)

    /// The connection's password is being checked (or, for an admin's `userAdd`/`userPasswd`, a new one
    /// hashed) on the thread pool: its later requests wait, to be answered in order after the reply.
    static let verification = ReadPause(rawValue: 1 << 1)

    /// Cluster mode: the connection's write waits to be appended to the stream and applied here; its
    /// later requests wait, to be answered in order after that write's reply.
    static let replication = ReadPause(rawValue: 1 << 2)

    /// Cluster mode: the connection's read or observe waits for this node to apply its `atLeastRev`; its
    /// later requests wait, to be answered in order after that request's reply.
    static let revision = ReadPause(rawValue: 1 << 3)

    /// A single node has more objects past their deadline than one step expires: the connection's request waits
    /// until the next steps have expired them all (`ExpiryHolds`), so that it reads none of them and the loop never
    /// stalls for the whole backlog.
    static let expiry = ReadPause(rawValue: 1 << 4)

    /// The connection's `backup` copy or `compact` runs (`Server+Backup`, `Server+Compaction`): its later requests
    /// wait, to be answered in order after that request's reply.
    static let maintenance = ReadPause(rawValue: 1 << 5)
}
