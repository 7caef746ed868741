import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `Store.usage()` (issue 27, the `kvod_storage_*_bytes` gauges): the SQLite store's files as `stat` sees them
/// and its file system as `statvfs` does; nothing for the in-memory store. The gauges over the real kvod:
/// Tests/Web/test_metrics.py.
@Suite("storage usage")
struct StorageUsageTests {
    private typealias F = StorageFixtures

    private func size(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue
    }

    @Test("the database and WAL sizes are the files', and grow with commits; free space is at most the file system's size")
    func sqliteFiles() throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 1000, historyByteLimit: 1 << 30)
        defer { store.close() }
        let first = try #require(store.usage())
        expectEqual(first.databaseBytes, size(store.databasePath))
        #expect((first.databaseBytes ?? 0) > 0)
        expectEqual(first.walBytes, (size(store.databasePath + "-wal") ?? 0))
        let free = try #require(first.freeBytes)
        let total = try #require(first.sizeBytes)
        #expect(free > 0 && free <= total)
        let value = JSONValue.object(["text": .string(String(repeating: "x", count: 2000))])
        try store.commit(F.batch((1...50).map { F.entry(UInt64($0), "o\($0)", value) }))
        let second = try #require(store.usage())
        expectEqual(second.walBytes, size(store.databasePath + "-wal"))
        #expect((second.databaseBytes ?? 0) + (second.walBytes ?? 0) >= (first.databaseBytes ?? 0) + (first.walBytes ?? 0) + 50 * 2000)
        expectEqual(second.sizeBytes, total)
    }

    @Test("figures that cannot be read are left out: the directory removed under the store")
    func missingFiles() throws {
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 1000, historyByteLimit: 1 << 30)
        store.close()
        try FileManager.default.removeItem(atPath: directory.path)
        expectEqual(store.usage(), StorageUsage(databaseBytes: nil, walBytes: nil, freeBytes: nil, sizeBytes: nil))
    }

    @Test("the in-memory store has no files: no usage")
    func memory() {
        expectEqual(MemoryStore().usage(), nil)
    }
}
