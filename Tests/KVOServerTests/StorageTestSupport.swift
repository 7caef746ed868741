import Foundation
import KVOJSON

@testable import KVOServer

/// A fresh directory under /tmp (mkdtemp), removed with everything in it when the value is released.
/// Owned by one test; the thread that runs it.
final class TemporaryDirectory {
    let path: String

    init() {
        var template = Array("/tmp/kvod-storage-test-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(created != nil, "mkdtemp failed: errno \(errno)")
        path = String(cString: created!)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// `path/name`.
    func appending(_ name: String) -> String { path + "/" + name }

    /// Names of the files directly inside.
    var fileNames: [String] { (try? FileManager.default.contentsOfDirectory(atPath: path))?.sorted() ?? [] }
}

/// Shorthands for the storage tests.
enum StorageFixtures {
    /// A history entry that sets `object` to `value` (nil deletes it).
    static func entry(_ rev: UInt64, _ object: String, _ value: JSONValue?,
                      change: ArrayChangeRecord? = nil) -> HistoryEntry {
        HistoryEntry(rev: rev, object: object, value: value, arrayChange: change)
    }

    /// A batch of entries ending at the last entry's revision.
    static func batch(_ entries: [HistoryEntry]) -> CommitBatch {
        CommitBatch(revision: entries.last?.rev ?? 0, entries: entries)
    }

    /// What the store counts for a history row: the JSON text of the value plus that of the change.
    static func rowBytes(_ entry: HistoryEntry) -> Int {
        (entry.value.map { JSONWriter.bytes($0).count } ?? 0)
            + (entry.arrayChange.map { JSONWriter.bytes($0.storageJSON).count } ?? 0)
    }
}
