import Foundation
import KVOJSON

@testable import KVOEngine
@testable import KVOModel
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

/// A history entry for the storage tests, with the object's value after it (what the batch stores
/// in `objects`).
struct FixtureEntry {
    let entry: HistoryEntry
    let value: JSONValue?
}

/// Shorthands for the storage tests.
enum StorageFixtures {
    /// A write that leaves `object` with `value` (nil deletes it), recorded as an array change when
    /// `change` is given, else as a creation (or a deletion). The store does not interpret changes.
    static func entry(_ rev: UInt64, _ object: String, _ value: JSONValue?,
                      change: ArrayChangeRecord? = nil) -> FixtureEntry {
        let recorded: RecordedChange
        if let change {
            recorded = .array(change)
        } else if let value {
            recorded = .created(value)
        } else {
            recorded = .deleted(.object([:]))
        }
        return FixtureEntry(entry: HistoryEntry(rev: rev, object: object, change: recorded), value: value)
    }

    /// A batch of entries ending at the last entry's revision, with each object's last value.
    static func batch(_ entries: [FixtureEntry]) -> CommitBatch {
        var objects: [String: StoredObject] = [:]
        for fixture in entries {
            objects[fixture.entry.object] = fixture.value.map(StoredObject.present) ?? .deleted
        }
        return CommitBatch(revision: entries.last?.entry.rev ?? 0, entries: entries.map(\.entry), objects: objects)
    }

    /// What the store counts for a history row: the JSON text of the change.
    static func rowBytes(_ fixture: FixtureEntry) -> Int {
        JSONWriter.bytes(fixture.entry.change.json).count
    }

    /// The same for an entry read back.
    static func rowBytes(_ entry: HistoryEntry) -> Int {
        JSONWriter.bytes(entry.change.json).count
    }
}
