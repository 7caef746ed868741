import KVOJSON

/// A `RecordedChange` as one JSON object with one member naming the kind of write: the form in which a
/// history entry restored from disk is held packed (`HistoryEntry`), and the form in which the persistent
/// store writes it in the `change` column of `history`:
///
///     {"created":{"items":["bread"]}}
///     {"deleted":{"items":["bread"]}}
///     {"expired":{"items":["bread"]}}                                      -- deleted when its ttl ended
///     {"set":{"path":["address","city"],"old":"Oslo","new":"Paris"}}        -- no "old": the key was new
///     {"array":{"path":["items"],"kind":2,"indexes":[1,2],"old":[],"new":["milk","eggs"]}}
///
/// `kind` is the `ChangeKind` raw value (2 insertion, 3 removal, 4 replacement). Pure functions on
/// values; any thread.
extension RecordedChange {
    /// The change as one JSON object.
    public var json: JSONValue {
        switch self {
        case let .created(value): return .object(["created": value])
        case let .deleted(value): return .object(["deleted": value])
        case let .expired(value): return .object(["expired": value])
        case let .set(path, old, new):
            var members: [String: JSONValue] = ["path": .array(path.map { .string($0) }), "new": new]
            if let old { members["old"] = old }
            return .object(["set": .object(members)])
        case let .array(record): return .object(["array": record.json])
        }
    }

    /// Appends the text of `json` to `buffer`, byte for byte what `JSONWriter.write` makes of
    /// it (keys sorted), without building the dictionaries: every write of a durable server stores
    /// one, so a `set`, by far the most common, is written field by field.
    package func writeJSON(into buffer: inout [UInt8]) {
        guard case let .set(path, old, new) = self else {
            JSONWriter.write(json, into: &buffer)
            return
        }
        JSONWriter.append("{\"set\":{\"new\":", to: &buffer)
        JSONWriter.write(new, into: &buffer)
        if let old {
            JSONWriter.append(",\"old\":", to: &buffer)
            JSONWriter.write(old, into: &buffer)
        }
        JSONWriter.append(",\"path\":[", to: &buffer)
        for (index, key) in path.enumerated() {
            if index > 0 { buffer.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(key, into: &buffer)
        }
        JSONWriter.append("]}}", to: &buffer)
    }

    /// Decodes the JSON object; the error says which field is wrong.
    package init(json: JSONValue) throws(ChangeDecodingError) {
        guard case let .object(outer) = json, outer.count == 1, let (kind, body) = outer.first else {
            throw .init("the change is not an object with one member")
        }
        switch kind {
        case "created": self = .created(body)
        case "deleted": self = .deleted(body)
        case "expired": self = .expired(body)
        case "set":
            guard case let .object(members) = body else { throw .init("'set' is not an object") }
            let path = try ChangeDecodingError.path(members["path"])
            guard let new = members["new"] else { throw .init("'set' has no 'new'") }
            self = .set(path: path, old: members["old"], new: new)
        case "array": self = .array(try ArrayChangeRecord(json: body))
        default: throw .init("unknown change '\(kind)'")
        }
    }
}

extension ArrayChangeRecord {
    /// The record as one JSON object.
    public var json: JSONValue {
        .object([
            "path": .array(path.map { .string($0) }),
            "kind": .int(Int64(kind.rawValue)),
            "indexes": .array(indexes.map { .int(Int64($0)) }),
            "old": .array(old),
            "new": .array(new),
        ])
    }

    /// Decodes the JSON object; the error says which field is wrong.
    package init(json: JSONValue) throws(ChangeDecodingError) {
        guard case let .object(members) = json else { throw .init("the array change is not a JSON object") }
        let path = try ChangeDecodingError.path(members["path"])
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

/// Why a change's JSON does not decode (the store makes it a `StorageError.corrupt` naming the row).
package struct ChangeDecodingError: Error {
    package let reason: String
    package init(_ reason: String) { self.reason = reason }

    static func path(_ value: JSONValue?) throws(ChangeDecodingError) -> [String] {
        guard let keys = value?.arrayValue else { throw .init("'path' is not an array") }
        var path: [String] = []
        for key in keys {
            guard let key = key.stringValue else { throw .init("'path' holds a non-string") }
            path.append(key)
        }
        return path
    }
}
