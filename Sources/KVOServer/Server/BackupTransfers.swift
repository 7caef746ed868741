import KVOModel

/// The backup being taken over the network (`Server+Backup`, docs/protocol.md, "Backups over the network"): at most
/// one at a time on a server (each copies the whole database and holds a file its size), owned by the connection that
/// asked for it, first while the copy is made on the thread pool, then while the client reads it chunk by chunk. It
/// ends when its last chunk is sent, when its connection closes, when its client stops asking for
/// `idleMilliseconds`, or when that connection starts another; its copy is removed then, whichever way.
///
/// Owned by `Server` (a value stored in it); loop thread only.
struct BackupTransfers {
    /// The largest chunk one reply carries, before base64 (256 KiB of text), less when the connection's output buffer
    /// has less room.
    static let chunkBytes = 192 << 10
    /// A transfer whose client asks for no chunk for this long ends (its copy removed).
    static let idleMilliseconds: UInt64 = 60_000

    enum Phase {
        /// The copy is being made on the thread pool; the connection's reading is paused (`ReadPause.maintenance`).
        case copying(StoreCopyJob)
        /// The copy is made and checked: the client reads it.
        case sending(BackupTransfer)
    }

    struct Transfer {
        let connection: ConnectionID
        var phase: Phase
        /// When it began or last sent a chunk (`ServerClock.milliseconds`).
        var lastActivity: UInt64
    }

    /// The transfer in progress, if any.
    var current: Transfer?

    /// Ends the transfer in progress (its copy removed, or removed when the copy job is done). Returns whether
    /// there was one.
    @discardableResult
    mutating func end() -> Bool {
        guard let transfer = current else { return false }
        current = nil
        switch transfer.phase {
        case let .copying(job): job.abandon()
        case let .sending(sending): sending.end()
        }
        return true
    }

    /// Whether the transfer in progress is `connection`'s.
    func belongs(to connection: ConnectionID) -> Bool {
        current?.connection == connection
    }

    /// Whether the transfer in progress waits for its client past `idleMilliseconds` at `now` (a copy being made never does).
    func isIdle(now: UInt64) -> Bool {
        guard let transfer = current, case .sending = transfer.phase else { return false }
        return now &- transfer.lastActivity >= BackupTransfers.idleMilliseconds
    }
}
