import CLibUV
import KVOJSON
import Logging
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// Global bounds shared by all connections: total output and input, scratch buffers.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// Scratch buffers (reply, event tails) larger than this are freed after use rather than kept.
    static let retainedScratchBytes = 1 << 20

    /// Empties a scratch buffer for reuse, keeping its memory unless a large reply or event grew it
    /// past `retainedScratchBytes` (then it would hold that memory for good). One access to `buffer`.
    @inline(__always)
    static func empty(_ buffer: inout [UInt8]) {
        if buffer.capacity > retainedScratchBytes {
            buffer = []
        } else {
            buffer.removeAll(keepingCapacity: true)
        }
    }

    /// All connections' queued output passed `--max-total-output`: closes the connections with the
    /// most queued first (the slowest consumers: a connection that keeps up has little queued) until
    /// the rest fit, logging why. Closing gives a connection's pending chunks back at once; those of a
    /// write in flight come back when the write is cancelled (next loop phase), so they are counted
    /// as freed already. Rare: O(connections).
    func enforceTotalOutputLimit() {
        let limit = configuration.maximumTotalOutputBytes
        var candidates: [(bytes: Int, connection: Connection)] = []
        for case let entry? in slots {
            let connection = entry.takeUnretainedValue()
            if connection.outputBytes > 0 { candidates.append((connection.outputBytes, connection)) }
        }
        candidates.sort { $0.bytes > $1.bytes }
        var beingFreed = 0
        for candidate in candidates {
            let total = loop.outputChunks.bytesInUse - beingFreed
            guard total > limit else { break }
            beingFreed += candidate.connection.inFlightBytes
            candidate.connection.close(reason: .totalOutputLimitExceeded(queued: candidate.bytes, total: total, limit: limit))
        }
    }

    /// All connections' unfinished lines passed `--max-total-input`: closes the connections holding
    /// the largest until the rest fit, logging why. Rare: O(connections).
    func enforceTotalInputLimit() {
        let limit = configuration.maximumTotalInputBytes
        while loop.bufferedInputBytes > limit {
            var largest: Connection?
            for case let entry? in slots {
                let connection = entry.takeUnretainedValue()
                if connection.accountedInputBytes > (largest?.accountedInputBytes ?? 0) { largest = connection }
            }
            guard let largest else { return }
            largest.close(reason: .totalInputLimitExceeded(buffered: largest.accountedInputBytes,
                                                           total: loop.bufferedInputBytes, limit: limit))
        }
    }
}
