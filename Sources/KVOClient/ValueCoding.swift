import KVOJSON

/// Converts between `Codable` values and `JSONValue`: directly for `JSONValue` itself and the plain
/// scalars (`String`, `Bool`, `Int`, `Int64`, `Double`), through `JSONValueEncoder`/`JSONValueDecoder`
/// (no JSON text in between, no Foundation) for everything else. Stateless; any thread.
enum ValueCoding {
    static func encode<T: Encodable>(_ value: T) throws(KVODError) -> JSONValue {
        switch value {
        case let json as JSONValue: return json
        case let text as String: return .string(text)
        case let flag as Bool: return .bool(flag)
        case let number as Int: return .int(Int64(number))
        case let number as Int64: return .int(number)
        case let number as Double: return .double(number)
        default: break
        }
        do {
            return try JSONValueEncoder.encode(value)
        } catch {
            throw .coding("cannot encode a \(T.self) as JSON: \(error)")
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws(KVODError) -> T {
        if let direct = decodeDirectly(type, from: value) { return direct }
        do {
            return try JSONValueDecoder.decode(T.self, from: value)
        } catch {
            throw .coding("cannot decode \(T.self) from \(PrintableText.escaped(value.description, limit: 200)): \(error)")
        }
    }

    /// The fast path: nil when `T` is not one of the directly converted types (or does not match).
    private static func decodeDirectly<T>(_ type: T.Type, from value: JSONValue) -> T? {
        if T.self == JSONValue.self { return value as? T }
        if T.self == String.self, case let .string(text) = value { return text as? T }
        if T.self == Bool.self, case let .bool(flag) = value { return flag as? T }
        if T.self == Int.self, let number = value.intValue { return Int(exactly: number) as? T }
        if T.self == Int64.self, let number = value.intValue { return number as? T }
        if T.self == Double.self, let number = value.doubleValue { return number as? T }
        return nil
    }
}
