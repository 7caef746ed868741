import Foundation
import Testing

@testable import KVOServer

/// The data directory's marker names the files the store has open, and an older marker (without those lines)
/// still reads; the store sets its own write-ahead log aside when it closes with its database file replaced
/// (issue 42). Real files in temporary directories; the processes' side is `ReplacedDatabaseTests`.
@Suite struct DataDirectoryMarkerTests {
    func open(_ directory: TemporaryDirectory) throws -> SQLiteStore {
        try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 100, historyByteLimit: 1 << 20)
    }

    @Test func anOlderMarkerReadsWithoutFiles() {
        let older = DataDirectoryMarker.parse(DataDirectoryMarker.contents(id: "abc", created: "2026-11-27T17:50:00Z"))
        expectEqual(older, DataDirectoryMarker.Contents(id: "abc", created: "2026-11-27T17:50:00Z", files: nil))
        // A line that does not parse records nothing, rather than a wrong file.
        let garbled = DataDirectoryMarker.parse("kvod data directory\nid: x\ndatabase file: device 1 inode\nwrite-ahead log: none\n")
        expectEqual(garbled.files, nil)
    }

    @Test func theFilesRoundTrip() {
        let database = FileIdentity(device: 2049, inode: 131_090)
        for log in [nil, FileIdentity(device: 2049, inode: 131_091)] {
            let files = DataDirectoryMarker.Files(database: database, log: log)
            let text = DataDirectoryMarker.contents(id: "abc", created: "now", files: files)
            expectEqual(DataDirectoryMarker.parse(text).files, files, "\(text)")
        }
        #expect(DataDirectoryMarker.contents(id: "a", created: "b", files: DataDirectoryMarker.Files(database: database, log: nil))
            .contains("database file: device 2049 inode 131090\nwrite-ahead log: none\n"))
    }

    @Test func theStoreRecordsItsFilesAndKeepsTheID() throws {
        let directory = TemporaryDirectory()
        let database = directory.path + "/kvod.sqlite3"
        let store = try open(directory)
        let first = try #require(DataDirectoryMarker.load(inDirectory: directory.path))
        let opened = try #require(FileIdentity(path: database))
        let log = try #require(FileIdentity(path: database + "-wal"))
        expectEqual(first.files, DataDirectoryMarker.Files(database: opened, log: log))
        store.close()
        #expect(store.closingNotes.isEmpty)
        // A clean close removed the log, and the marker says so; the id stays.
        #expect(!FileManager.default.fileExists(atPath: database + "-wal"))
        let closed = try #require(DataDirectoryMarker.load(inDirectory: directory.path))
        #expect(closed == DataDirectoryMarker.Contents(id: first.id, created: first.created,
                                                       files: DataDirectoryMarker.Files(database: opened, log: nil)))
    }

    @Test func closingWithTheDatabaseReplacedSetsItsOwnLogAside() throws {
        let directory = TemporaryDirectory()
        let other = TemporaryDirectory()
        let database = directory.path + "/kvod.sqlite3"
        let store = try open(directory)
        try open(other).close()
        expectEqual(rename(other.path + "/kvod.sqlite3", database), 0)
        let problem = try #require(store.filesProblem())
        let log = try #require(FileManager.default.contents(atPath: database + "-wal"))
        store.close()
        #expect(store.closingNotes == [
            "\(problem): moved this kvod's write-ahead log '\(database)-wal' to '\(database)-wal.lost' rather than leave it where SQLite would apply it to the next database file at that path (it holds the last commits of the database it was written for)",
            "\(problem): removed this kvod's '\(database)-shm' (the index of its write-ahead log)",
        ])
        expectEqual(FileManager.default.contents(atPath: database + "-wal.lost"), log)
        #expect(!FileManager.default.fileExists(atPath: database + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: database + "-shm"))
        // A second time: the first set-aside log keeps its name.
        let again = try open(directory)
        #expect(again.openingNotes.isEmpty, "nothing written for another file is left: \(again.openingNotes)")
        let third = TemporaryDirectory()
        try open(third).close()
        expectEqual(rename(third.path + "/kvod.sqlite3", database), 0)
        again.close()
        expectEqual(again.closingNotes.first?.contains("to '\(database)-wal.lost-2'"), true, "\(again.closingNotes)")
        expectEqual(FileManager.default.contents(atPath: database + "-wal.lost"), log)
    }

    @Test func aStartSetsAsideTheLogOfAnotherFile() throws {
        let directory = TemporaryDirectory()
        let database = directory.path + "/kvod.sqlite3"
        // What a killed kvod leaves: its log (copied while the store has it open) and the marker naming it.
        let store = try open(directory)
        let marker = try #require(DataDirectoryMarker.load(inDirectory: directory.path))
        let log = try #require(FileManager.default.contents(atPath: database + "-wal"))
        store.close()
        #expect(FileManager.default.createFile(atPath: database + "-wal", contents: log))
        let logFile = try #require(FileIdentity(path: database + "-wal"))
        try DataDirectoryMarker.record(inDirectory: directory.path, files: DataDirectoryMarker.Files(
            database: try #require(marker.files?.database), log: logFile), keeping: marker)
        // The database file replaced: the log is set aside.
        let other = TemporaryDirectory()
        try open(other).close()
        expectEqual(rename(other.path + "/kvod.sqlite3", database), 0)
        let reopened = try open(directory)
        expectEqual(reopened.openingNotes.count, 1, "\(reopened.openingNotes)")
        #expect(reopened.openingNotes.first?.hasSuffix("moved it to '\(database)-wal.lost' instead of applying it to a database it was not written for") == true,
                "\(reopened.openingNotes)")
        expectEqual(FileManager.default.contents(atPath: database + "-wal.lost"), log)
        reopened.close()
    }
}
