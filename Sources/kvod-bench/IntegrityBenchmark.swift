import KVOServer

/// `kvod-bench integrity`: what a cluster node's stream integrity checks (`StreamIntegrity`) cost per
/// stream entry, on the loop thread: decoding aside (the apply path decodes every entry anyway), the
/// publisher check and the running hash (SHA-256 over the entry's id and bytes), for entries of 1 and 16
/// realistic sets (request ids, nested key paths, structured values); and the state stored with every
/// group commit (`encodedState`, a few publishers). Prints nanoseconds per entry and per KiB.
///
///     kvod-bench integrity [--entries 200000]
enum IntegrityBenchmark {
    static func run(entries: Int) {
        print("#### Stream integrity: cost per stream entry (kvod-bench integrity)")
        print("| entry | bytes | ns per entry (admit + chain) | ns per KiB |")
        print("|---|---:|---:|---:|")
        for operations in [1, 16] {
            let batches = (1...64).map { number in
                ReplicationEntry(version: 3, node: "n1", batch: "n1.k3j9x.\(number)", operations: (0..<operations).map { index in
                    ReplicationEntry.Operation(line: Array(#"{"id":\#(number * 100 + index),"op":"set","object":"user:\#(index)","keyPath":"address.city","value":{"name":"Lyon","zip":"69001","geo":[45.76,4.83]}}"#.utf8), user: "ada")
                }, publisherSequence: UInt64(number))
            }
            let encoded = batches.map { $0.encoded() }
            let integrity = StreamIntegrity()
            var counter: UInt64 = 0
            let started = monotonicNanoseconds()
            for round in 0..<entries {
                counter += 1
                var entry = batches[round & 63]
                entry.publisherSequence = counter
                if integrity.admit(entry, at: counter) == .apply { integrity.applied(entry, data: encoded[round & 63], at: counter) }
            }
            let nanoseconds = Double(monotonicNanoseconds() - started) / Double(entries)
            let bytes = encoded[0].count
            print("| \(operations) set\(operations == 1 ? "" : "s") | \(bytes) | \(Int(nanoseconds)) | \(Int(nanoseconds * 1024 / Double(bytes))) |")
        }
        let integrity = StreamIntegrity()
        for publisher in 0..<6 {
            let entry = ReplicationEntry(version: 3, node: "n\(publisher % 3)", batch: "n\(publisher % 3).p\(publisher).1", operations: [], publisherSequence: 1)
            integrity.applied(entry, data: entry.encoded(), at: UInt64(publisher + 1))
        }
        var total = 0
        let started = monotonicNanoseconds()
        for _ in 0..<(entries / 10) { total &+= integrity.encodedState.count }
        let perCommit = Double(monotonicNanoseconds() - started) / Double(entries / 10)
        print("State stored with each group commit (6 publishers): \(integrity.encodedState.count) bytes, \(Int(perCommit)) ns to encode (\(total > 0 ? "ok" : "?")).")
    }
}
