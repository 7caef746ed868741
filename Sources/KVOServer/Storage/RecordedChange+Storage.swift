import KVOJSON

/// How the persistent store writes an `ArrayChangeRecord` in the `change` column of `history`:
///
///     {"indexes":[1,2],"kind":2,"new":["milk","eggs"],"old":[],"path":["items"]}
///
/// `kind` is the `ChangeKind` raw value (2 insertion, 3 removal, 4 replacement). Pure functions on values;
/// any thread.
extension ArrayChangeRecord {
    /// The record as the JSON object stored on disk.
    var storageJSON: JSONValue {
        .object([
            "path": .array(path.map { .string($0) }),
            "kind": .int(Int64(kind.rawValue)),
            "indexes": .array(indexes.map { .int(Int64($0)) }),
            "old": .array(old),
            "new": .array(new),
        ])
    }

    /// Decodes the stored JSON object; the error string says which field is wrong.
    init(storageJSON json: JSONValue) throws(ArrayChangeDecodingError) {
        guard case let .object(members) = json else { throw .init("the array change is not a JSON object") }
        guard let pathValues = members["path"]?.arrayValue else { throw .init("'path' is not an array") }
        var path: [String] = []
        for key in pathValues {
            guard let key = key.stringValue else { throw .init("'path' holds a non-string") }
            path.append(key)
        }
        guard let rawKind = members["kind"]?.intValue, let kind = ChangeKind(rawValue: Int(rawKind)) else {
            throw .init("'kind' is not a change kind")
        }
        guard let indexValues = members["indexes"]?.arrayValue else { throw .init("'indexes' is not an array") }
        var indexes: [Int] = []
        for index in indexValues {
            guard let index = index.intValue, index >= 0, let position = Int(exactly: index) else {
                throw .init("'indexes' holds something other than a non-negative integer")
            }
            indexes.append(position)
        }
        guard let old = members["old"]?.arrayValue else { throw .init("'old' is not an array") }
        guard let new = members["new"]?.arrayValue else { throw .init("'new' is not an array") }
        self.init(path: path, kind: kind, indexes: indexes, old: old, new: new)
    }
}

/// Why a stored array change does not decode (becomes a `StorageError.corrupt` naming the row).
struct ArrayChangeDecodingError: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}
