import KVOJSON

/// In-place writes into nested JSON values.
extension JSONValue {
    /// Calls `body` with the value at `path` (object keys, or indexes into arrays), mutated in place.
    /// The path must exist: the engine resolves and checks it first (`WriteTarget`).
    mutating func modify<Result>(at path: ArraySlice<String>,
                                 _ body: (inout JSONValue) throws(KVOError) -> Result) throws(KVOError) -> Result {
        guard let key = path.first else { return try body(&self) }
        switch self {
        case .object(var members):
            guard var child = members[key] else { throw KVOError(.notFound, "'\(key)' does not exist") }
            // Release every other reference so the nested storage is uniquely referenced and
            // mutates in place instead of being copied.
            self = .null
            members[key] = .null
            defer {
                members[key] = child
                self = .object(members)
            }
            return try child.modify(at: path.dropFirst(), body)
        case .array(var elements):
            guard let position = key.arrayIndex, position < elements.count else {
                throw KVOError(.outOfRange, "index \(key) is out of range")
            }
            var child = elements[position]
            self = .null
            elements[position] = .null
            defer {
                elements[position] = child
                self = .array(elements)
            }
            return try child.modify(at: path.dropFirst(), body)
        default:
            throw KVOError(.typeMismatch, "cannot write inside \(article) \(typeName)")
        }
    }
}
