import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The bookkeeping behind the total bounds: the chunk pool's byte count and peak, and the connections'
/// deadline queue.
@Suite struct GlobalBoundsAccountingTests {
    @Test func thePoolCountsTheBytesOfTheChunksItLent() {
        let pool = OutputChunkPool(firstChunkSize: 64, chunkSize: 256, retainedChunkLimit: 2)
        var buffer = ChunkedOutputBuffer()
        buffer.append(Array(repeating: 7, count: 1000), pool: pool)
        #expect(pool.bytesInUse == 64 + 4 * 256)  // 64 + 256 * 4 >= 1000
        expectEqual(pool.peakBytesInUse, pool.bytesInUse)
        buffer.consume(64 + 256, returningTo: pool)
        #expect(pool.bytesInUse == 64 + 3 * 256)  // the kept first chunk stays lent
        buffer.release(returningTo: pool)
        expectEqual(pool.bytesInUse, 0)
        expectEqual(pool.peakBytesInUse, 64 + 4 * 256)
        pool.resetPeak()
        expectEqual(pool.peakBytesInUse, 0)
    }

    @Test func deadlinesComeDueInOrder() {
        var deadlines = DeadlineQueue()
        for index in 0..<3000 {
            deadlines.add(ConnectionID(UInt64(index + 1), slot: UInt32(index)), deadline: UInt64(index))
        }
        expectEqual(deadlines.takeDue(now: 0).map(\.connection.rawValue), [1])
        let due = deadlines.takeDue(now: 2499)
        #expect(due.count == 2499 && due.first?.connection.rawValue == 2 && due.last?.connection.rawValue == 2500)
        #expect(!deadlines.isEmpty)
        expectEqual(deadlines.takeDue(now: 10_000).count, 500)
        #expect(deadlines.isEmpty)
        deadlines.add(ConnectionID(9999, slot: 0), deadline: 20_000)
        #expect(deadlines.takeDue(now: 19_999).isEmpty)
        expectEqual(deadlines.takeDue(now: 20_000).count, 1)
    }
}
