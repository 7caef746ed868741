import KVOEngine
import KVOJSON
import KVOServer

#if canImport(Glibc)
import Glibc
#endif

/// Storage benchmarks: the persistent store with many small objects, in a temporary directory
/// under `$TMPDIR` (default /tmp) that is removed afterwards (kept, for inspection with `sqlite3`,
/// when `KVOD_BENCH_KEEP` is set).
///
/// `startup`: write N objects in batches of 10,000 history entries, close, then time what a restart
/// costs: opening the store, `load()`, and building the engine from the loaded state; print the
/// disk footprint and the process's resident memory.
/// `commit latency`: one-entry commits (what one loop iteration with one write costs) in each sync
/// mode, against the same database.
///
/// Runs on the main thread only, like everything in kvod-bench.
enum StorageBenchmark {
    static let batchSize = 10_000
    static let historyLimit = 100_000
    static let historyByteLimit = 64 << 20

    static func run(objects: Int, commits: Int) {
        let directory = makeTemporaryDirectory()
        defer {
            if getenv("KVOD_BENCH_KEEP") == nil {
                removeDirectory(directory)
            } else {
                print("kept \(directory)")
            }
        }
        print("storage: \(objects) objects in \(directory), batches of \(batchSize), history \(historyLimit) rows, sync normal")

        // Write.
        let store = openStore(directory, sync: .normal)
        var writeNanoseconds: UInt64 = 0
        var next = 0
        while next < objects {
            let end = min(next + batchSize, objects)
            var objectsInBatch: [String: StoredObject] = [:]
            let entries = (next..<end).map { index in
                objectsInBatch["object-\(index)"] = .present(smallObject(index))
                return HistoryEntry(rev: UInt64(index + 1), object: "object-\(index)", change: .created(smallObject(index)))
            }
            let batch = CommitBatch(revision: UInt64(end), entries: entries, objects: objectsInBatch)
            let start = monotonicNanoseconds()
            commitOrExit(store, batch)
            writeNanoseconds += monotonicNanoseconds() - start
            next = end
        }
        let closeStart = monotonicNanoseconds()
        store.close()
        let closeNanoseconds = monotonicNanoseconds() - closeStart
        print(pad("write \(objects) objects (\((objects + batchSize - 1) / batchSize) commits)", 46)
              + seconds(writeNanoseconds) + "   " + format1(Double(writeNanoseconds) / Double(max(objects, 1)) / 1000) + " µs/object")
        print(pad("close (checkpoints the WAL)", 46) + seconds(closeNanoseconds))

        // Footprint.
        let databaseBytes = fileSize(directory + "/" + SQLiteStore.fileName)
        let walBytes = fileSize(directory + "/" + SQLiteStore.fileName + "-wal")
        let total = databaseBytes + walBytes
        print(pad("disk: kvod.sqlite3 + kvod.sqlite3-wal", 46) + "\(databaseBytes) + \(walBytes) bytes = "
              + format1(Double(total) / 1_048_576) + " MiB, " + format1(Double(total) / Double(max(objects, 1))) + " bytes/object")

        // Restart, in a fresh process so that its resident memory is what a starting kvod needs.
        runChild(arguments: ["storage-restart", "--objects", String(objects)], directory: directory)

        // One-entry commits in each sync mode.
        guard commits > 0 else { return }
        print("")
        print("commit latency: \(commits) commits of one entry (an update of an existing object), same database")
        print(pad("sync", 10) + pad("median", 12) + pad("p99", 12) + "max")
        var revision = UInt64(objects)
        for sync in [SyncMode.off, .normal, .full] {
            let store = openStore(directory, sync: sync)
            var samples: [UInt64] = []
            samples.reserveCapacity(commits)
            for round in 0..<commits {
                revision += 1
                let index = (round &* 7919) % max(objects, 1)
                let value = smallObject(index + round)
                let entry = HistoryEntry(rev: revision, object: "object-\(index)",
                                         change: .set(path: ["n"], old: .int(Int64(index + round - 1)), new: value["n"]!))
                let start = monotonicNanoseconds()
                commitOrExit(store, CommitBatch(revision: revision, entries: [entry], objects: ["object-\(index)": .present(value)]))
                samples.append(monotonicNanoseconds() - start)
            }
            store.close()
            samples.sort()
            let median = samples[samples.count / 2]
            let p99 = samples[min(samples.count - 1, samples.count * 99 / 100)]
            print(pad(sync.rawValue, 10) + pad(microseconds(median), 12) + pad(microseconds(p99), 12) + microseconds(samples.last!))
        }
    }

    /// The restart half of `run`, in the child process: open, load, build the engine, report memory.
    static func restart(objects: Int) {
        guard let variable = getenv(directoryVariable) else { fail("\(directoryVariable) is not set") }
        let directory = String(cString: variable)
        let rssBefore = residentKilobytes()
        let openStart = monotonicNanoseconds()
        let store = openStore(directory, sync: .normal)
        let openNanoseconds = monotonicNanoseconds() - openStart
        let loadStart = monotonicNanoseconds()
        var loaded: PersistedState?
        do {
            loaded = try store.load()
        } catch {
            fail("load failed: \(error)")
        }
        let loadNanoseconds = monotonicNanoseconds() - loadStart
        let rssAfterLoad = residentKilobytes()
        var state = loaded!
        loaded = nil
        guard state.objects.count == objects, state.revision == UInt64(objects),
              state.history.count == min(objects, historyLimit),
              state.objects["object-\(objects - 1)"] == smallObject(objects - 1)
        else {
            fail("the loaded state does not match what was written: \(state.objects.count) objects, revision \(state.revision)")
        }
        print(pad("open (lock, pragmas, history sizes)", 46) + seconds(openNanoseconds))
        print(pad("load (\(state.objects.count) objects, \(state.history.count) history rows)", 46) + seconds(loadNanoseconds))
        let engineStart = monotonicNanoseconds()
        let engine = KVOEngine(restoring: state, historyLimit: historyLimit, historyByteLimit: historyByteLimit)
        let engineNanoseconds = monotonicNanoseconds() - engineStart
        precondition(engine.objectCount == objects && engine.revision == UInt64(objects))
        print(pad("KVOEngine(restoring:)", 46) + seconds(engineNanoseconds))
        print(pad("startup total (open + load + engine)", 46) + seconds(openNanoseconds + loadNanoseconds + engineNanoseconds))
        let rssAfterEngine = residentKilobytes()
        print(pad("resident memory (VmRSS)", 46) + "at start \(mebibytes(rssBefore)), after load \(mebibytes(rssAfterLoad)), "
              + "with the engine \(mebibytes(rssAfterEngine))")
        // What kvod keeps once started: its server drops the loaded state after building the engine (the
        // engine shares the objects and history values; the state's own history array goes).
        state = PersistedState()
        let rssStarted = residentKilobytes()
        print(pad("resident memory, loaded state released", 46) + "\(mebibytes(rssStarted)): "
              + format1(Double(rssStarted) * 1024 / Double(max(objects, 1))) + " bytes per object, "
              + format1(Double(rssStarted - rssBefore) * 1024 / Double(max(objects, 1))) + " beyond the process's start")
        store.close()
        withExtendedLifetime(engine) {}
        withExtendedLifetime(state) {}
    }

    /// `{"name":"object-<i>","n":<i>,"tags":["a","b"]}`.
    static func smallObject(_ index: Int) -> JSONValue {
        .object(["name": .string("object-\(index)"), "n": .int(Int64(index)), "tags": ["a", "b"]])
    }

    // MARK: - Helpers

    /// Tells the `storage-restart` child where the database is.
    static let directoryVariable = "KVOD_BENCH_STORAGE_DIR"

    /// Runs this executable again with `arguments` and the directory in the environment; waits for it.
    private static func runChild(arguments: [String], directory: String) {
        fflush(nil)
        setenv(directoryVariable, directory, 1)
        let argv = (["/proc/self/exe"] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/proc/self/exe", nil, nil, argv, environ)
        guard spawned == 0 else { fail("cannot start the restart process: \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        guard status == 0 else { fail("the restart process failed (wait status \(status))") }
    }

    private static func openStore(_ directory: String, sync: SyncMode) -> SQLiteStore {
        do {
            return try SQLiteStore(directory: directory, sync: sync, historyLimit: historyLimit,
                                       historyByteLimit: historyByteLimit)
        } catch {
            fail("cannot open the store: \(error)")
        }
    }

    private static func commitOrExit(_ store: SQLiteStore, _ batch: CommitBatch) {
        do {
            try store.commit(batch)
        } catch {
            fail("commit failed: \(error)")
        }
    }

    private static func fail(_ message: String) -> Never {
        print("kvod-bench: \(message)")
        exit(1)
    }

    private static func makeTemporaryDirectory() -> String {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array((base + "/kvod-bench-storage-XXXXXX").utf8CString)
        guard let created = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            fail("mkdtemp in \(base) failed: \(String(cString: strerror(errno)))")
        }
        return String(cString: created)
    }

    /// Removes the benchmark's directory: the store's files, then the directory itself.
    private static func removeDirectory(_ directory: String) {
        for suffix in ["", "-wal", "-shm", "-journal", ".lock"] {
            unlink(directory + "/" + SQLiteStore.fileName + suffix)
        }
        unlink(directory + "/" + SQLiteStore.markerFileName)
        rmdir(directory)
    }

    private static func fileSize(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }

    /// VmRSS from /proc/self/status, in KiB (0 when unavailable).
    private static func residentKilobytes() -> Int {
        guard let file = fopen("/proc/self/status", "r") else { return 0 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix("VmRSS:") {
                return Int(text.dropFirst(6).filter { $0.isNumber }) ?? 0
            }
        }
        return 0
    }

    private static func seconds(_ nanoseconds: UInt64) -> String {
        pad(format2(Double(nanoseconds) / 1e9) + " s", 10)
    }

    private static func microseconds(_ nanoseconds: UInt64) -> String {
        format1(Double(nanoseconds) / 1000) + " µs"
    }

    private static func mebibytes(_ kilobytes: Int) -> String {
        format1(Double(kilobytes) / 1024) + " MiB"
    }
}
