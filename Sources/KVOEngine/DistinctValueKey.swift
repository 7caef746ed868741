import KVOJSON

/// A JSON value as a set member for `@distinctUnionOfObjects` and `@distinctUnionOfArrays`: two keys are
/// equal exactly when their values are equal as `set` and `observe` compare them (`JSONValue ==`:
/// numbers by exact value across integers and doubles, so `1` equals `1.0` but 9007199254740993 does not
/// equal 9007199254740992). The hash agrees with that equality: an integral double hashes as the integer
/// it equals. A value type; any thread.
struct DistinctValueKey: Hashable {
    let value: JSONValue

    static func == (lhs: DistinctValueKey, rhs: DistinctValueKey) -> Bool {
        lhs.value == rhs.value
    }

    func hash(into hasher: inout Hasher) {
        DistinctValueKey.hash(value, into: &hasher)
    }

    private static func hash(_ value: JSONValue, into hasher: inout Hasher) {
        switch value {
        case .null:
            hasher.combine(0 as UInt8)
        case let .bool(flag):
            hasher.combine(1 as UInt8)
            hasher.combine(flag)
        case let .int(integer):
            hasher.combine(2 as UInt8)
            hasher.combine(integer)
        case let .double(number):
            if let integer = Int64(exactly: number) {
                hasher.combine(2 as UInt8)
                hasher.combine(integer)
            } else {
                hasher.combine(3 as UInt8)
                hasher.combine(number)
            }
        case let .string(text):
            hasher.combine(4 as UInt8)
            hasher.combine(text)
        case let .array(elements):
            hasher.combine(5 as UInt8)
            hasher.combine(elements.count)
            for element in elements { hash(element, into: &hasher) }
        case let .object(members):
            // Member order is not part of an object's identity: the count is enough for a hash.
            hasher.combine(6 as UInt8)
            hasher.combine(members.count)
        }
    }
}
