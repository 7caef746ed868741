/// The one nesting limit for everything kvod stores, and the margin every reader keeps above it.
///
/// A stored document (an object with everything in it, a class definition) is at most `maximum` levels
/// deep, counted as `JSONParser` counts them: every array or object is one level, so `{}` is 1 and
/// `{"a":[[1]]}` is 3. A value written at a key path of k keys sits k levels inside its object, so a
/// write is accepted when k plus the value's own depth is at most `maximum` (the server answers
/// `too_large` otherwise, and nothing changes).
///
/// Whatever carries a stored value wraps it in at most `envelopeAllowance` more levels: a request
/// (`{"value":...}`), a reply (`{"value":...}`, `{"classes":[...]}`), an event (`{"change":{"new":...}}`)
/// and a history row on disk (`{"array":{"old":[...]}}`). Every reader that kvod and its clients use
/// (the request parser, the storage loader, KVOWireProbe and kvoclient) parses with `JSONParser`, whose
/// `maximumDepth` must therefore be at least `maximum + envelopeAllowance`; `readersAcceptStoredValues`
/// states that relation and a test holds it. Constants; any thread.
public enum StoredDepth {
    /// The deepest stored document: 128 levels, half of what every reader accepts, so that any
    /// envelope fits around it with room to spare, and far deeper than any data model needs.
    public static let maximum = 128
    /// The most levels any message or stored row adds around a stored value (the deepest today is 3).
    public static let envelopeAllowance = 8

    /// Whether every reader accepts the deepest stored value inside the deepest envelope.
    public static var readersAcceptStoredValues: Bool {
        JSONParser.maximumDepth >= maximum + envelopeAllowance
    }
}

extension JSONValue {
    /// How many levels of arrays and objects the value nests (0 for a scalar, 1 for `[]` or `{}`),
    /// counted only as far as `limit + 1`: a deeper value returns `limit + 1` without walking past it.
    /// Costs one step per element walked; no allocation.
    public func nestingDepth(upTo limit: Int) -> Int {
        guard limit >= 0 else { return 0 }
        switch self {
        case .null, .bool, .int, .double, .string:
            return 0
        case let .array(elements):
            var deepest = 0
            for element in elements {
                deepest = Swift.max(deepest, element.nestingDepth(upTo: limit - 1))
                if deepest >= limit { break }
            }
            return deepest + 1
        case let .object(members):
            var deepest = 0
            for value in members.values {
                deepest = Swift.max(deepest, value.nestingDepth(upTo: limit - 1))
                if deepest >= limit { break }
            }
            return deepest + 1
        }
    }
}
