#if canImport(Glibc)
import Glibc
#endif

/// `kvod-bench callgrind` (issue 13): kvod's instructions per set for each set shape, counted by
/// `valgrind --tool=callgrind`, which does not depend on how busy the machine is.
///
///     kvod-bench callgrind [--shapes string,string-id,object3-id,object10-id,object3-id-nested]
///                          [--subscribers 1] [--shape-bytes 64] [--sets 20480] [--warmup 2048]
///                          [--valgrind valgrind] [--kvod PATH] [--keep DIRECTORY] [--users-globs N]
///
/// (By default every shape of `SetShape.named`, issue 44's client forms among them, each beside its canonical twin.)
///
/// For each shape it runs kvod `--in-memory` under callgrind twice: both runs set up the subscribers
/// and pipeline `--warmup` sets (512 awaiting a reply), the second then `--sets` more; instructions per
/// set = (second run's total − first run's) / `--sets`, so start-up, set-up and shutdown cancel out.
/// `--keep DIRECTORY` keeps the second run's `callgrind.out` files there (for `callgrind_annotate`).
/// `--users-globs N` (issue 24) measures each shape twice more against kvod `--in-memory --users FILE`
/// whose one user's rules are N globs (N − 1 that do not match the object, then `bench*`; see
/// `KVODStorage.benchRules`), every connection sending `auth` first, and prints open mode, the user and
/// their ratio side by side (same build, same run).
/// Runs only on the loop thread of this process; prints a markdown table.
enum CallgrindBenchmark {
    static func main(arguments: [String]) -> Never {
        let allowed: Set<String> = ["shapes", "subscribers", "shape-bytes", "sets", "warmup", "valgrind", "kvod", "keep", "markdown", "users-globs"]
        let options = NetworkBenchmark.Options(arguments, allowed: allowed)
        let shapes = options.shapes(fallback: SetShape.named.map(\.shape))
        let subscribers = options.int("subscribers", 1)
        let requestedBytes = options.int("shape-bytes", 64)
        let sets = options.int("sets", 20_480)
        let warmup = options.int("warmup", 2_048)
        let valgrind = options.string("valgrind") ?? "valgrind"
        let keep = options.string("keep")
        let userGlobs = options.string("users-globs") == nil ? nil : options.int("users-globs", 100)
        var executables = Executables.defaults()
        if let kvod = options.string("kvod") { executables.kvod = kvod }
        ChildProcesses.installInterruptHandler()
        print("kvod-bench callgrind: \(executables.kvod); load average \(Report.loadAverage()) (instruction counts do not depend on it)")

        let storages: [KVODStorage] = [.inMemory] + (userGlobs.map { [.inMemoryWithUser(globs: $0)] } ?? [])
        var rows: [String] = []
        for shape in shapes {
            let bytes = shape.bytes(forRequested: requestedBytes)
            var perSetByStorage: [Double] = []
            var cells: [String] = []
            for storage in storages {
                let suffix = storage == .inMemory ? "" : "-globs\(userGlobs!)"
                let base = countInstructions(shape: shape, bytes: bytes, subscribers: subscribers, sets: warmup, storage: storage,
                                             valgrind: valgrind, executables: executables, keepAs: nil)
                let keepAs = keep.map { "\($0)/callgrind.out.\(shape)-s\(subscribers)\(suffix)" }
                let measured = countInstructions(shape: shape, bytes: bytes, subscribers: subscribers, sets: warmup + sets,
                                                 storage: storage, valgrind: valgrind, executables: executables, keepAs: keepAs)
                let perSet = Double(measured - base) / Double(sets)
                let label = storage == .inMemory ? "" : " (\(storage.label))"
                print("callgrind \(pad(shape.description, 21)) S=\(subscribers) B=\(bytes): \(grouped(perSet)) instructions per set "
                      + "(\(measured) − \(base) over \(sets) sets)\(label)")
                perSetByStorage.append(perSet)
                cells.append("\(grouped(perSet)) | \(measured) | \(base)")
            }
            if storages.count == 1 {
                rows.append("| \(shape) | \(subscribers) | \(bytes) | \(cells[0]) |")
            } else {
                let ratio = perSetByStorage[1] / perSetByStorage[0]
                rows.append("| \(shape) | \(subscribers) | \(bytes) | \(grouped(perSetByStorage[0])) | \(grouped(perSetByStorage[1])) "
                            + "| x\(thousandths(ratio)) |")
            }
        }
        let text: String
        if let userGlobs {
            text = """
                #### Instructions per set (callgrind): open mode and a user with \(userGlobs) glob rules

                `kvod-bench callgrind --subscribers \(subscribers) --shape-bytes \(requestedBytes) --sets \(sets) --warmup \(warmup) --users-globs \(userGlobs)`:
                kvod `--in-memory` (open mode), then kvod `--in-memory --users FILE` where every connection first
                authenticates as one user whose rules are \(userGlobs) globs (\(userGlobs - 1) not matching the object,
                then `bench*=read,write`), under `valgrind --tool=callgrind`; per set = (total with \(warmup) + \(sets)
                sets − total with \(warmup)) / \(sets); ratio = user / open.

                | shape | S | B | open: instructions per set | \(userGlobs)-glob user: instructions per set | ratio |
                |---|---:|---:|---:|---:|---:|
                \(rows.joined(separator: "\n"))

                """
        } else {
            text = """
                #### Instructions per set (callgrind)

                `kvod-bench callgrind --subscribers \(subscribers) --shape-bytes \(requestedBytes) --sets \(sets) --warmup \(warmup)`: kvod
                `--in-memory` under `valgrind --tool=callgrind`; per set = (total with \(warmup) + \(sets) sets − total with
                \(warmup)) / \(sets). Deterministic within a few hundred instructions: the machine's load does not change it.

                | shape | S | B | instructions per set | total | baseline |
                |---|---:|---:|---:|---:|---:|
                \(rows.joined(separator: "\n"))

                """
        }
        print("")
        print(text)
        if let path = options.string("markdown"), let file = fopen(path, "w") {
            fputs(text, file)
            fclose(file)
        }
        exit(0)
    }

    /// Runs kvod under callgrind for one clean `sets`-set run and returns its total instruction count.
    private static func countInstructions(shape: SetShape, bytes: Int, subscribers: Int, sets: Int, storage: KVODStorage,
                                          valgrind: String, executables: Executables, keepAs: String?) -> UInt64 {
        let output = keepAs ?? "/tmp/kvod-bench-callgrind-\(getpid())-\(monotonicNanoseconds()).out"
        var wrapped = executables
        wrapped.kvodWrapper = [valgrind, "--tool=callgrind", "--quiet", "--callgrind-out-file=" + output]
        let server = ServerProcess.start(.kvod(storage), executables: wrapped)
        let result = FanOutRun.run(server: server, subscribers: subscribers, payloadLength: bytes, shape: shape,
                                   seconds: 0, pace: .counted(sets: sets, window: 512))
        server.stop()
        defer { if keepAs == nil { unlink(output) } }
        guard result.integrity.isClean, result.sets == UInt64(sets) else {
            let variant = storage == .inMemory ? "" : " (\(storage.label))"
            fail("the callgrind run of \(shape)\(variant) was not clean: \(result.sets) of \(sets) sets acknowledged, "
                 + "lost/reordered/dup \(result.integrity.summary)")
        }
        guard let text = ProcessStats.readFile(output) else { fail("callgrind wrote no \(output)") }
        for line in text.split(separator: "\n") where line.hasPrefix("summary:") || line.hasPrefix("totals:") {
            if let count = UInt64(line.split(separator: " ").dropFirst().first ?? "") { return count }
        }
        fail("no 'summary:' line in \(output)")
    }

    /// `ratio` with three decimals (1.0234 -> "1.023").
    private static func thousandths(_ ratio: Double) -> String {
        guard ratio.isFinite, ratio >= 0 else { return "-" }
        let scaled = Int((ratio * 1000).rounded())
        let fraction = String(scaled % 1000)
        return "\(scaled / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }
}
