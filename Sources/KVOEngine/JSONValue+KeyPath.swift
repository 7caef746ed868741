import KVOJSON
import KVOModel

/// In-place writes into nested JSON values.
///
/// Values are copy-on-write: a write deep inside a large array or object must not copy it. Each
/// level therefore moves its container out of `self` (`takeObject`/`takeArray` leave `null`
/// behind), so the container is uniquely referenced while it is changed, and puts it back after.
extension JSONValue {
    /// Moves the members out, leaving `null`; nil (and `self` untouched) if this is not an object.
    mutating func takeObject() -> [String: JSONValue]? {
        guard case .object = self else { return nil }
        var taken = JSONValue.null
        swap(&taken, &self)
        guard case let .object(members) = consume taken else { return nil }
        return members
    }

    /// Moves the elements out, leaving `null`; nil (and `self` untouched) if this is not an array.
    mutating func takeArray() -> [JSONValue]? {
        guard case .array = self else { return nil }
        var taken = JSONValue.null
        swap(&taken, &self)
        guard case let .array(elements) = consume taken else { return nil }
        return elements
    }

    /// Calls `body` with the value at `path` (object keys, or indexes into arrays), mutated in place.
    /// The path must exist: the engine resolves and checks it first (`WriteTarget`).
    mutating func modify<Result>(at path: ArraySlice<String>,
                                 _ body: (inout JSONValue) throws(KVOError) -> Result) throws(KVOError) -> Result {
        guard let key = path.first else { return try body(&self) }
        // The container is moved out, so it is uniquely referenced, and the child is then mutated
        // where it is stored (one look-up of `key`, no removal and re-insertion, no copy).
        if var members = takeObject() {
            defer { self = .object(members) }
            guard let position = members.index(forKey: key) else { throw KVOError(.notFound, "'\(key)' does not exist") }
            return try members.values[position].modify(at: path.dropFirst(), body)
        }
        if var elements = takeArray() {
            defer { self = .array(elements) }
            guard let position = key.arrayIndex, position < elements.count else {
                throw KVOError(.outOfRange, "index \(key) is out of range")
            }
            return try elements[position].modify(at: path.dropFirst(), body)
        }
        throw KVOError(.typeMismatch, "cannot write inside \(article) \(typeName)")
    }
}

extension JSONValue {
    /// The value stored at `path` (object keys or array indexes), `null` where there is none.
    func observedValue(at path: [String]) -> JSONValue {
        var current = self
        for key in path {
            switch current {
            case let .object(members):
                guard let next = members[key] else { return .null }
                current = next
            case let .array(elements):
                guard let index = key.arrayIndex, index < elements.count else { return .null }
                current = elements[index]
            default:
                return .null
            }
        }
        return current
    }
}
