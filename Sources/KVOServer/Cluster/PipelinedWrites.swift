import KVOModel
import KVOEngine

/// Cluster mode: per connection, its writes waiting for the stream (submitted, not yet answered) and the
/// one request held behind them.
///
/// A connection goes on reading while its writes are in flight, so that writes pipelined on it join the
/// next batch instead of costing a stream round trip each; their replies keep request order because one
/// node's batches are appended one at a time and applied in stream order. Any other request (a read, an
/// observe, a refused line) must be answered after those writes and see them: it is held here, and the
/// connection reads nothing more, until the last of them is answered; the server then handles it and
/// lets the connection read again. A connection reads nothing more either while it has
/// `--max-pending-requests` writes in flight.
///
/// Bookkeeping only, owned by the server: it sends the replies and pauses and resumes the connections.
/// Entries go when their count drops to zero (a closed connection's too: each write is answered once,
/// applied, refused or expired). Loop thread only.
struct PipelinedWrites {
    /// A request held behind a connection's writes.
    enum Held {
        /// A request line, to be handled as it came.
        case line([UInt8])
        /// A line over `--max-line-length` (discarded), to be answered `too_large`.
        case oversizedLine
    }

    private var inFlight: [ConnectionID: Int] = [:]
    private var held: [ConnectionID: Held] = [:]

    /// Writes of `connection` not yet answered.
    func count(of connection: ConnectionID) -> Int { inFlight[connection] ?? 0 }

    /// Whether `connection` has a request held behind its writes.
    func isHolding(_ connection: ConnectionID) -> Bool { held[connection] != nil }

    /// A write of `connection` was submitted; returns how many it now has in flight.
    mutating func submitted(_ connection: ConnectionID) -> Int {
        let count = (inFlight[connection] ?? 0) + 1
        inFlight[connection] = count
        return count
    }

    /// A write of `connection` was answered (or dropped with its connection); returns how many are left.
    mutating func answered(_ connection: ConnectionID) -> Int {
        guard let count = inFlight[connection] else { return 0 }
        if count <= 1 {
            inFlight[connection] = nil
            return 0
        }
        inFlight[connection] = count - 1
        return count - 1
    }

    /// Holds `request` (one after writes in flight) until they are answered. One at a time: the
    /// connection stops reading when a request is held.
    mutating func hold(_ request: Held, for connection: ConnectionID) {
        held[connection] = request
    }

    /// The held request of `connection`, no longer held.
    mutating func takeHeld(_ connection: ConnectionID) -> Held? {
        held.removeValue(forKey: connection)
    }
}
