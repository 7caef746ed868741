import KVOJSON

/// Key-value coding over nested JSON objects.
extension JSONValue {
    /// The value at `keyPath` for a reader (`get`): `null` through a missing key or a null;
    /// `type_mismatch` through a scalar or an array.
    func value(at keyPath: KeyPath) throws(KVOError) -> JSONValue {
        var current = self
        for (depth, key) in keyPath.components.enumerated() {
            switch current {
            case let .object(members):
                guard let next = members[key] else { return .null }
                current = next
            case .null:
                return .null
            default:
                throw KVOError(.typeMismatch, "'\(keyPath.prefix(depth))' is \(current.article) \(current.typeName), not an object")
            }
        }
        return current
    }

    /// The value an observer of `components` sees: like `value(at:)` but a broken path is `null`.
    func observedValue<C: Collection>(at components: C) -> JSONValue where C.Element == String {
        var current = self
        for key in components {
            guard case let .object(members) = current, let next = members[key] else { return .null }
            current = next
        }
        return current
    }

    /// Sets the value at `keyPath[from...]`, never creating intermediate objects: `not_found`
    /// through a missing key or a null, `type_mismatch` through a scalar or an array.
    mutating func setValue(_ newValue: JSONValue, at keyPath: KeyPath, from depth: Int = 0) throws(KVOError) {
        guard case .object(var members) = self else {
            // Only reached for the root, which is always an object.
            throw KVOError(.typeMismatch, "the object is not a JSON object")
        }
        let key = keyPath.components[depth]
        if depth == keyPath.components.count - 1 {
            self = .null  // release our reference so `members` is uniquely referenced
            members[key] = newValue
            self = .object(members)
            return
        }
        guard var child = members[key], child != .null else {
            throw KVOError(.notFound, "'\(keyPath.prefix(depth + 1))' does not exist")
        }
        guard case .object = child else {
            throw KVOError(.typeMismatch, "'\(keyPath.prefix(depth + 1))' is \(child.article) \(child.typeName), not an object")
        }
        self = .null
        members[key] = .null
        defer {
            members[key] = child
            self = .object(members)
        }
        try child.setValue(newValue, at: keyPath, from: depth + 1)
    }

    /// "a" or "an", for messages.
    fileprivate var article: String {
        switch self {
        case .array, .object: return "an"
        default: return "a"
        }
    }
}
