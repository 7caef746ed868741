import CLibUV
import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The bytes a buffer would write, read back through `gather` (what `Connection.flush` hands to libuv).
private func writtenBytes(_ buffer: ChunkedOutputBuffer, capacity: Int? = nil) -> [UInt8] {
    let capacity = capacity ?? buffer.chunkCount
    let buffers = UnsafeMutablePointer<uv_buf_t>.allocate(capacity: max(capacity, 1))
    defer { buffers.deallocate() }
    let filled = buffer.gather(into: buffers, capacity: capacity)
    var bytes: [UInt8] = []
    for index in 0..<filled {
        let piece = UnsafeRawBufferPointer(start: buffers[index].base, count: buffers[index].len)
        bytes.append(contentsOf: piece)
    }
    return bytes
}

/// What `appendEventHead` must produce: the event head and the id in decimal.
private func eventHead(_ subscription: Int64) -> [UInt8] {
    EventEncoder.head + Array(String(subscription).utf8)
}

/// A recognisable run of bytes: `length` bytes counting up from `seed`.
private func pattern(_ length: Int, seed: Int) -> [UInt8] {
    (0..<length).map { UInt8(truncatingIfNeeded: seed &+ $0 &* 7) }
}

@Suite struct ChunkedOutputBufferTests {
    @Test func bytesAppendedAcrossChunkBoundariesComeOutExactly() {
        let pool = OutputChunkPool(firstChunkSize: 64, chunkSize: 64, retainedChunkLimit: 100)
        var buffer = ChunkedOutputBuffer()
        var expected: [UInt8] = []
        // Pieces smaller than, equal to and several times larger than a chunk, at every offset.
        for (step, length) in [1, 63, 64, 2, 200, 0, 64, 65, 5, 300, 17].enumerated() {
            let piece = pattern(length, seed: step * 31)
            buffer.append(piece, pool: pool)
            expected += piece
            expectEqual(buffer.count, expected.count)
        }
        expectEqual(writtenBytes(buffer), expected)
        expectEqual(buffer.chunkCount, (expected.count + 63) / 64, "appending never leaves a gap between pieces")
        expectEqual(pool.chunksInUse, buffer.chunkCount)
        buffer.release(returningTo: pool)
    }

    @Test func eventHeadsAreNeverSplitAndTailsAre() {
        let pool = OutputChunkPool(firstChunkSize: 64, chunkSize: 64, retainedChunkLimit: 100)
        var buffer = ChunkedOutputBuffer()
        var expected: [UInt8] = []
        var headSpans: [(start: Int, length: Int)] = []
        var random = SplitMix64(state: 5)
        let head = EventEncoder.headWords
        for event in 0..<500 {
            let subscription: Int64 = [0, 7, 12_345, Int64.max, Int64.min, -3][event % 6]
            buffer.appendEventHead(head, headLength: EventEncoder.fullHeadLength, subscription: subscription, pool: pool)
            let tail = pattern(Int(random.next() % 150), seed: event)
            buffer.append(tail, pool: pool)
            headSpans.append((expected.count, eventHead(subscription).count))
            expected += eventHead(subscription) + tail
        }
        expectEqual(buffer.count, expected.count)
        expectEqual(writtenBytes(buffer), expected)
        // No chunk boundary falls inside a head (from its first byte to its last digit).
        let buffers = UnsafeMutablePointer<uv_buf_t>.allocate(capacity: buffer.chunkCount)
        defer { buffers.deallocate() }
        let filled = buffer.gather(into: buffers, capacity: buffer.chunkCount)
        var boundaries: [Int] = []
        var position = 0
        for index in 0..<filled {
            position += buffers[index].len
            boundaries.append(position)
        }
        #expect(filled > 100, "the events spread over many chunks")
        for (start, length) in headSpans {
            #expect(!boundaries.contains { $0 > start && $0 < start + length }, "head at \(start) split")
        }
        buffer.release(returningTo: pool)
    }

    @Test func partialWritesAreConsumedFromTheFrontAndFreeTheirChunks() {
        let pool = OutputChunkPool(firstChunkSize: 64, chunkSize: 64, retainedChunkLimit: 100)
        var buffer = ChunkedOutputBuffer()
        var expected = pattern(1_000, seed: 1)
        buffer.append(expected, pool: pool)
        expectEqual(pool.chunksInUse, 16)
        var random = SplitMix64(state: 11)
        while !expected.isEmpty {
            // Sometimes within a chunk, sometimes across several, sometimes exactly to a boundary.
            let written = min(expected.count, [1, 63, 64, 130, Int(random.next() % 200) + 1][Int(random.next() % 5)])
            buffer.consume(written, returningTo: pool)
            expected.removeFirst(written)
            expectEqual(buffer.count, expected.count)
            expectEqual(writtenBytes(buffer), expected)
            expectEqual(pool.chunksInUse, buffer.heldChunkCount, "a chunk written out goes back to the pool at once")
            #expect(buffer.heldChunkCount - buffer.chunkCount <= 1, "but for the first one, which the buffer keeps")
            // New output after a partial write lands after what is still queued.
            if expected.count % 3 == 0 && !expected.isEmpty {
                let more = pattern(40, seed: expected.count)
                buffer.append(more, pool: pool)
                expected += more
                expectEqual(writtenBytes(buffer), expected)
            }
        }
        #expect(buffer.isEmpty)
        expectEqual(buffer.chunkCount, 0, "an emptied buffer holds no output chunk")
        expectEqual(pool.chunksInUse, 1, "it keeps its small first chunk for the next output")
        buffer.release(returningTo: pool)
        expectEqual(pool.chunksInUse, 0, "release gives that one back too")
    }

    @Test func gatherStopsAtItsCapacityWithTheFrontFirst() {
        let pool = OutputChunkPool(firstChunkSize: 64, chunkSize: 64, retainedChunkLimit: 100)
        var buffer = ChunkedOutputBuffer()
        let bytes = pattern(300, seed: 9)
        buffer.append(bytes, pool: pool)
        buffer.consume(10, returningTo: pool)
        expectEqual(writtenBytes(buffer, capacity: 2), Array(bytes[10..<128]))
        buffer.release(returningTo: pool)
    }

    @Test func chunksGoBackToThePoolWhichKeepsOnlyItsLimit() {
        let pool = OutputChunkPool(firstChunkSize: 64, chunkSize: 64, retainedChunkLimit: 3)
        var first = ChunkedOutputBuffer()
        var second = ChunkedOutputBuffer()
        first.append(pattern(64 * 5, seed: 2), pool: pool)
        second.append(pattern(10, seed: 3), pool: pool)
        expectEqual(pool.chunksInUse, 6)
        expectEqual(pool.freeChunkCount, 0)
        first.removeAll(returningTo: pool)
        expectEqual(first.count, 0)
        expectEqual(pool.chunksInUse, 2, "second's chunk and first's kept first chunk")
        expectEqual(pool.freeChunkCount, 3, "one of the four given back was freed, not kept")
        // Reused: growing again takes the kept chunk, then the free ones, before allocating.
        first.append(pattern(64 * 3, seed: 4), pool: pool)
        expectEqual(pool.freeChunkCount, 1)
        expectEqual(writtenBytes(first), pattern(64 * 3, seed: 4))
        first.release(returningTo: pool)
        second.release(returningTo: pool)
        expectEqual(pool.chunksInUse, 0)
    }

    @Test func theCountIsWhatTheOutputLimitSees() {
        // `Connection` compares pending plus in-flight `count` against --max-output-buffer: it must
        // be the bytes still to write, not the chunks' capacity nor what was already written.
        let pool = OutputChunkPool(firstChunkSize: 64, chunkSize: 64, retainedChunkLimit: 100)
        var buffer = ChunkedOutputBuffer()
        buffer.appendEventHead(EventEncoder.headWords, headLength: EventEncoder.fullHeadLength, subscription: 42, pool: pool)
        expectEqual(buffer.count, 26)
        buffer.appendEventHead(EventEncoder.headWords, headLength: EventEncoder.fullHeadLength, subscription: 42, pool: pool)
        expectEqual(buffer.count, 52, "the second head starts a new chunk; the unused end of the first is not counted")
        expectEqual(buffer.chunkCount, 2)
        buffer.consume(30, returningTo: pool)
        expectEqual(buffer.count, 22)
        expectEqual(writtenBytes(buffer), Array(eventHead(42).suffix(22)))
        buffer.consume(22, returningTo: pool)
        expectEqual(buffer.count, 0)
        expectEqual(pool.chunksInUse, 1, "the kept first chunk")
        buffer.release(returningTo: pool)
        expectEqual(pool.chunksInUse, 0)
    }

    @Test func theFirstChunkIsSmallAndTheRestFullSize() {
        let pool = OutputChunkPool(firstChunkSize: 64, chunkSize: 256, retainedChunkLimit: 100)
        var buffer = ChunkedOutputBuffer()
        let bytes = pattern(64 + 256 + 10, seed: 6)
        buffer.append(bytes, pool: pool)
        expectEqual(buffer.chunkCount, 3, "64 bytes in the first chunk, then 256, then 10")
        let buffers = UnsafeMutablePointer<uv_buf_t>.allocate(capacity: 3)
        defer { buffers.deallocate() }
        expectEqual(buffer.gather(into: buffers, capacity: 3), 3)
        expectEqual((0..<3).map { buffers[$0].len }, [64, 256, 10])
        expectEqual(writtenBytes(buffer), bytes)
        // Each size goes back to its own free list and is taken again for the same use.
        buffer.removeAll(returningTo: pool)
        expectEqual(pool.freeChunkCount, 2, "the full-size chunks go back; the small first one stays with the buffer")
        buffer.append(pattern(300, seed: 8), pool: pool)
        expectEqual(pool.freeChunkCount, 1, "the kept small chunk and one full-size chunk were reused")
        expectEqual(writtenBytes(buffer), pattern(300, seed: 8))
        buffer.release(returningTo: pool)
        expectEqual(pool.chunksInUse, 0)
        expectEqual(pool.freeChunkCount, 3)
    }
}
