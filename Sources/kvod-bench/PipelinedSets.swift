import KVOWireProbe

/// A publisher's pipelined writes for the benchmarks that compare a server with and without some load
/// (`PatternBenchmark`, `LiveQueryBenchmark`): windows of 1,000 request lines sent at once, every reply
/// read (counted by newlines: the publisher observes nothing), for `seconds`. Main thread.
enum PipelinedSets {
    /// Requests per second over `seconds`; `line(n)` is the n-th request line (n from 0, without newline).
    static func perSecond(_ connection: KVOConnection, seconds: Double, line: (Int) -> String) -> Double {
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        var sent = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var window: [UInt8] = []
        repeat {
            window.removeAll(keepingCapacity: true)
            for index in sent..<(sent + 1_000) {
                window += Array(line(index).utf8)
                window.append(0x0A)
            }
            do {
                try connection.send(raw: window)
                var replies = 0
                while replies < 1_000 {
                    let count = try buffer.withUnsafeMutableBytes { try connection.receiveRaw(into: $0) }
                    guard count > 0 else { fail("kvod closed the publisher") }
                    for byte in buffer[0..<count] where byte == 0x0A { replies += 1 }
                }
            } catch {
                fail("pipelined writes: \(error)")
            }
            sent += 1_000
        } while monotonicNanoseconds() < deadline
        return Double(sent) / (Double(monotonicNanoseconds() - start) / 1e9)
    }
}
