import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// A `LineFramer.Frame` copied out of the callback.
private enum Framed: Equatable, CustomStringConvertible {
    case line([UInt8])
    case tooLarge

    static func text(_ text: String) -> Framed { .line(Array(text.utf8)) }

    var description: String {
        switch self {
        case let .line(bytes): return "line(\(String(decoding: bytes, as: UTF8.self).debugDescription))"
        case .tooLarge: return "tooLarge"
        }
    }
}

extension LineFramer {
    /// Feeds `chunk` and returns the frames; the callback answers false once `stopAfter` frames came.
    fileprivate mutating func frames(_ chunk: [UInt8], stopAfter: Int? = nil) -> [Framed] {
        var frames: [Framed] = []
        chunk.withUnsafeBufferPointer { buffer in
            feed(buffer) { frame in
                switch frame {
                case let .line(line): frames.append(.line(Array(line)))
                case .tooLarge: frames.append(.tooLarge)
                }
                if let stopAfter { return frames.count < stopAfter }
                return true
            }
        }
        return frames
    }

    fileprivate mutating func frames(_ chunk: String, stopAfter: Int? = nil) -> [Framed] {
        frames(Array(chunk.utf8), stopAfter: stopAfter)
    }

    /// Feeds `bytes` in chunks of `size` bytes and returns all frames.
    fileprivate mutating func frames(_ bytes: [UInt8], chunkSize size: Int) -> [Framed] {
        var frames: [Framed] = []
        var start = 0
        while start < bytes.count {
            let end = min(start + size, bytes.count)
            frames += self.frames(Array(bytes[start..<end]))
            start = end
        }
        return frames
    }
}

@Suite("LineFramer")
struct LineFramerTests {
    @Test("many lines in one chunk")
    func manyLinesInOneChunk() {
        var framer = LineFramer(maximumLineLength: 100)
        let frames = framer.frames("one\ntwo\n{\"op\":\"ping\"}\nfour\n")
        expectEqual(frames, [.text("one"), .text("two"), .text(#"{"op":"ping"}"#), .text("four")])
        expectEqual(framer.bufferedCount, 0)
    }

    @Test("a chunk's unfinished last line waits for the rest")
    func partialTail() {
        var framer = LineFramer(maximumLineLength: 100)
        expectEqual(framer.frames("one\ntw"), [.text("one")])
        expectEqual(framer.bufferedCount, 2)
        expectEqual(framer.frames("o\nthr"), [.text("two")])
        expectEqual(framer.bufferedCount, 3)
        expectEqual(framer.frames("ee"), [])
        expectEqual(framer.bufferedCount, 5)
        expectEqual(framer.frames("\n"), [.text("three")])
        expectEqual(framer.bufferedCount, 0)
    }

    @Test("a line split over many chunks, byte by byte")
    func byteByByte() {
        let input = Array("{\"op\":\"set\",\"value\":\"é😀\"}\nsecond\n".utf8)
        for chunkSize in [1, 2, 3, 5, 7, 64] {
            var framer = LineFramer(maximumLineLength: 100)
            let frames = framer.frames(input, chunkSize: chunkSize)
            expectEqual(frames, [.text("{\"op\":\"set\",\"value\":\"é😀\"}"), .text("second")], "chunk size \(chunkSize)")
            expectEqual(framer.bufferedCount, 0)
        }
    }

    @Test("a carriage return before the newline is dropped; others are kept")
    func carriageReturns() {
        var framer = LineFramer(maximumLineLength: 100)
        expectEqual(framer.frames("a\r\nb\n\r\n"), [.text("a"), .text("b"), .text("")])
        expectEqual(framer.frames("x\ry\r\n"), [.text("x\ry")])
        expectEqual(framer.frames("two\r\r\n"), [.text("two\r")])
        expectEqual(framer.frames("\rlead\n"), [.text("\rlead")])
        // A \r that ends a chunk without a newline is held, not dropped.
        expectEqual(framer.frames("tail\r"), [])
        expectEqual(framer.frames("more\n"), [.text("tail\rmore")])
    }

    @Test("\\r\\n split between chunks")
    func crlfSplit() {
        var framer = LineFramer(maximumLineLength: 100)
        expectEqual(framer.frames("abc\r"), [])
        expectEqual(framer.frames("\ndef\r"), [.text("abc")])
        expectEqual(framer.frames("\n"), [.text("def")])
        let input = Array("first\r\nsecond\r\n\r\n".utf8)
        var byteByByte = LineFramer(maximumLineLength: 100)
        expectEqual(byteByByte.frames(input, chunkSize: 1), [.text("first"), .text("second"), .text("")])
    }

    @Test("empty lines are delivered as empty lines")
    func emptyLines() {
        var framer = LineFramer(maximumLineLength: 10)
        expectEqual(framer.frames("\n\n\r\nx\n\n"), [.text(""), .text(""), .text(""), .text("x"), .text("")])
        expectEqual(framer.frames(Array("\n\n".utf8), chunkSize: 1), [.text(""), .text("")])
    }

    @Test("an empty chunk does nothing")
    func emptyChunk() {
        var framer = LineFramer(maximumLineLength: 10)
        expectEqual(framer.frames("ab"), [])
        expectEqual(framer.frames([UInt8]()), [])
        let empty = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
        var called = false
        framer.feed(empty) { _ in called = true; return true }
        #expect(!called)
        expectEqual(framer.bufferedCount, 2)
        expectEqual(framer.frames("c\n"), [.text("abc")])
    }

    @Test("a stop during a line reports how much of the chunk was consumed, so the rest can be fed later")
    func stopReportsConsumedBytes() {
        let chunk = Array("one\ntw".utf8)
        var framer = LineFramer(maximumLineLength: 100)
        expectEqual(framer.frames(chunk), [.text("one")])
        // "o\nthree\r\nfour\nfi": the first line completes "two", the stop comes after "three".
        let next = Array("o\nthree\r\nfour\nfi".utf8)
        var lines: [String] = []
        let consumed = next.withUnsafeBufferPointer { buffer in
            framer.feed(buffer) { frame in
                guard case let .line(line) = frame else { return true }
                lines.append(String(decoding: line, as: UTF8.self))
                return lines.count < 2
            }
        }
        expectEqual(lines, ["two", "three"])
        expectEqual(consumed, "o\nthree\r\n".utf8.count)
        expectEqual(framer.bufferedCount, 0)
        // Feeding the rest later gives the remaining lines, in order.
        expectEqual(framer.frames(Array(next[consumed...])), [.text("four")])
        expectEqual(framer.frames("ve\n"), [.text("five")])
        // A chunk consumed whole, and an oversized line's stop.
        var whole = LineFramer(maximumLineLength: 3)
        expectEqual(Array("ab\ncd".utf8).withUnsafeBufferPointer { whole.feed($0) { _ in true } }, 5)
        var oversized = LineFramer(maximumLineLength: 3)
        expectEqual(Array("abcdef\nx\n".utf8).withUnsafeBufferPointer { oversized.feed($0) { _ in false } }, 7)
    }

    // MARK: - The limit

    @Test("a line exactly at the limit is accepted, one byte more is tooLarge", arguments: [1, 2, 3, 1000])
    func exactlyAtTheLimit(chunkSize: Int) {
        let limit = 16
        let atLimit = String(repeating: "a", count: limit)
        let overLimit = String(repeating: "b", count: limit + 1)
        let input = Array("\(atLimit)\n\(overLimit)\nafter\n".utf8)
        var framer = LineFramer(maximumLineLength: limit)
        expectEqual(framer.frames(input, chunkSize: chunkSize), [.text(atLimit), .tooLarge, .text("after")])
        expectEqual(framer.bufferedCount, 0)
    }

    @Test("a line at the limit followed by \\r\\n, in one chunk, is accepted")
    func atTheLimitWithCRLFInOneChunk() {
        let limit = 8
        let atLimit = String(repeating: "a", count: limit)
        var framer = LineFramer(maximumLineLength: limit)
        expectEqual(framer.frames("\(atLimit)\r\nx\n"), [.text(atLimit), .text("x")])
        // Held partly from an earlier chunk, with the \r\n arriving together.
        expectEqual(framer.frames("aaaa"), [])
        expectEqual(framer.frames("aaaa\r\ny\n"), [.text(atLimit), .text("y")])
        // One byte over the limit before the \r\n is still too large.
        expectEqual(framer.frames("\(atLimit)a\r\nz\n"), [.tooLarge, .text("z")])
    }

    @Test(
        "a line at the limit ending in \\r\\n is accepted whichever way the bytes are split",
        arguments: [1, 3, 9]
    )
    func atTheLimitWithCRLFSplit(chunkSize: Int) {
        let limit = 8
        let atLimit = String(repeating: "a", count: limit)
        var framer = LineFramer(maximumLineLength: limit)
        // Each of these chunk sizes puts a read boundary between the "\r" (byte 8) and the "\n" (byte 9).
        expectEqual(framer.frames(Array("\(atLimit)\r\nx\n".utf8), chunkSize: chunkSize), [.text(atLimit), .text("x")])
    }

    @Test("a line over the limit in one chunk is reported and the next line still delivered")
    func oversizedInOneChunk() {
        var framer = LineFramer(maximumLineLength: 4)
        expectEqual(framer.frames("12345\nok\n123456789\n1234\n"), [.tooLarge, .text("ok"), .tooLarge, .text("1234")])
        expectEqual(framer.bufferedCount, 0)
    }

    @Test("a buffered partial line that the next chunk pushes over the limit")
    func partialPushedOverLimit() {
        var framer = LineFramer(maximumLineLength: 6)
        expectEqual(framer.frames("abcd"), [])
        expectEqual(framer.frames("efg\nnext\n"), [.tooLarge, .text("next")])
        expectEqual(framer.bufferedCount, 0)
        // The same, but without the newline in the pushing chunk.
        expectEqual(framer.frames("abcd"), [])
        expectEqual(framer.frames("efg"), [.tooLarge])
        expectEqual(framer.bufferedCount, 0)
        expectEqual(framer.frames("hij\nnext\n"), [.text("next")])
    }

    @Test("an oversized line over many chunks is reported once, its remainder discarded, the next line delivered",
          arguments: [1, 2, 5, 16, 100])
    func oversizedOverManyChunks(chunkSize: Int) {
        let limit = 32
        let huge = String(repeating: "x", count: limit * 20)
        let input = Array("before\n\(huge)\nafter\n".utf8)
        let hugeLineEnd = "before\n".utf8.count + huge.utf8.count  // index of its newline
        var framer = LineFramer(maximumLineLength: limit)
        var frames: [Framed] = []
        var start = 0
        var sawTooLarge = false
        while start < input.count {
            let end = min(start + chunkSize, input.count)
            let chunkFrames = framer.frames(Array(input[start..<end]))
            frames += chunkFrames
            if chunkFrames.contains(.tooLarge) { sawTooLarge = true }
            // Never more buffered than the limit; nothing at all once the line is known to be too long.
            #expect(framer.bufferedCount <= limit)
            if sawTooLarge, end <= hugeLineEnd {
                expectEqual(framer.bufferedCount, 0)
            }
            start = end
        }
        expectEqual(frames, [.text("before"), .tooLarge, .text("after")])
        expectEqual(framer.bufferedCount, 0)
    }

    @Test("tooLarge is reported as soon as the line passes the limit, before its newline arrives")
    func reportedEarly() {
        var framer = LineFramer(maximumLineLength: 10)
        expectEqual(framer.frames(String(repeating: "y", count: 10)), [])
        expectEqual(framer.bufferedCount, 10)
        expectEqual(framer.frames("y"), [.tooLarge])
        expectEqual(framer.bufferedCount, 0)
        for _ in 0..<100 {
            expectEqual(framer.frames(String(repeating: "z", count: 50)), [])
            expectEqual(framer.bufferedCount, 0)
        }
        // The discarded line's newline ends it; the line after it, even a partial one, is framed normally.
        expectEqual(framer.frames("zzz\nnew"), [])
        expectEqual(framer.bufferedCount, 3)
        expectEqual(framer.frames("line\n"), [.text("newline")])
    }

    @Test("two oversized lines in a row are each reported once")
    func twoOversizedLines() {
        let limit = 5
        let input = Array("\(String(repeating: "a", count: 30))\n\(String(repeating: "b", count: 30))\nc\n".utf8)
        for chunkSize in [1, 4, 7, 100] {
            var framer = LineFramer(maximumLineLength: limit)
            expectEqual(framer.frames(input, chunkSize: chunkSize), [.tooLarge, .tooLarge, .text("c")], "chunk size \(chunkSize)")
        }
    }

    // MARK: - Early stop

    @Test("the callback returning false stops the chunk; the rest of it is dropped")
    func earlyStop() {
        var framer = LineFramer(maximumLineLength: 100)
        expectEqual(framer.frames("a\nb\nc\n", stopAfter: 1), [.text("a")])
        expectEqual(framer.frames("a\nb\nc\n", stopAfter: 2), [.text("a"), .text("b")])

        var trailing = LineFramer(maximumLineLength: 100)
        expectEqual(trailing.frames("a\nb\npartial", stopAfter: 1), [.text("a")])
        expectEqual(trailing.bufferedCount, 0)
        // Nothing of the dropped rest comes back.
        expectEqual(trailing.frames("x\n"), [.text("x")])
    }

    @Test("early stop on a line gathered from a partial")
    func earlyStopAfterPartial() {
        var framer = LineFramer(maximumLineLength: 100)
        expectEqual(framer.frames("hel"), [])
        expectEqual(framer.frames("lo\nworld\n", stopAfter: 1), [.text("hello")])
        expectEqual(framer.bufferedCount, 0)
    }

    @Test("early stop on tooLarge")
    func earlyStopOnTooLarge() {
        var framer = LineFramer(maximumLineLength: 3)
        expectEqual(framer.frames("toolong\nok\n", stopAfter: 1), [.tooLarge])
        var partial = LineFramer(maximumLineLength: 3)
        expectEqual(partial.frames("ab"), [])
        expectEqual(partial.frames("cdef\nok\n", stopAfter: 1), [.tooLarge])
        expectEqual(partial.bufferedCount, 0)
    }

    @Test("lines are handed out with their exact bytes, including non-UTF-8 ones")
    func rawBytes() {
        var framer = LineFramer(maximumLineLength: 10)
        let bytes: [UInt8] = [0xFF, 0x00, 0xC3, 0x0A, 0x80, 0x0D, 0x0A]
        expectEqual(framer.frames(bytes), [.line([0xFF, 0x00, 0xC3]), .line([0x80])])
        expectEqual(framer.frames(bytes, chunkSize: 1), [.line([0xFF, 0x00, 0xC3]), .line([0x80])])
    }

    @Test("an early stop reports how much of the chunk it consumed, so the rest can be fed later")
    func consumedCountOnEarlyStop() {
        var framer = LineFramer(maximumLineLength: 100)
        let chunk = Array("a\nbc\nrest-partial".utf8)
        let consumed = chunk.withUnsafeBufferPointer { framer.feed($0) { _ in false } }
        expectEqual(consumed, 2)
        let all = chunk.withUnsafeBufferPointer { framer.feed($0) { _ in true } }
        expectEqual(all, chunk.count)
        // Gathered from a partial: consumed counts to the end of the line within this chunk.
        var split = LineFramer(maximumLineLength: 100)
        expectEqual(split.frames("he"), [])
        let second = Array("llo\nnext\n".utf8)
        expectEqual(second.withUnsafeBufferPointer { split.feed($0) { _ in false } }, 4)
        expectEqual(split.frames(Array(second[4...])), [.text("next")])
    }
}
