import KVOJSON

/// Decodes a `Decodable` straight from a `JSONValue` (no text in between): how `KVOClient` turns replies
/// and change values into the user's types. A value; any thread. Numbers decode into any numeric type
/// that holds them exactly (`3.0` as an `Int`; an integer as a `Double`).
struct JSONValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: JSONValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(value: JSONValue, codingPath: [any CodingKey] = []) {
        self.value = value
        self.codingPath = codingPath
    }

    /// Decodes `type` from `value`.
    static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try JSONValueDecoder(value: value).decode(type)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case let .object(members) = value else { throw mismatch([String: JSONValue].self) }
        return KeyedDecodingContainer(Keyed<Key>(members: members, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case let .array(elements) = value else { throw mismatch([JSONValue].self) }
        return Unkeyed(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { value == .null }

    func decode(_ type: Bool.Type) throws -> Bool { try decodeValue(type) }
    func decode(_ type: String.Type) throws -> String { try decodeValue(type) }
    func decode(_ type: Double.Type) throws -> Double { try decodeValue(type) }
    func decode(_ type: Float.Type) throws -> Float { try decodeValue(type) }
    func decode(_ type: Int.Type) throws -> Int { try decodeValue(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decodeValue(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decodeValue(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decodeValue(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decodeValue(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decodeValue(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeValue(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeValue(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeValue(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeValue(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == JSONValue.self { return value as! T }
        return try T(from: self)
    }

    /// The scalar cases.
    func decodeValue<T>(_ type: T.Type) throws -> T {
        switch value {
        case let .bool(flag): if let result = flag as? T { return result }
        case let .string(text): if let result = text as? T { return result }
        case let .int(number):
            if let result = JSONValueDecoder.number(Double(number), exactInteger: number, as: type) { return result }
        case let .double(number):
            if let result = JSONValueDecoder.number(number, exactInteger: Int64(exactly: number), as: type) { return result }
        default: break
        }
        throw mismatch(type)
    }

    private static func number<T>(_ number: Double, exactInteger: Int64?, as type: T.Type) -> T? {
        if T.self == Double.self { return number as? T }
        if T.self == Float.self { return Float(number) as? T }
        guard let integer = exactInteger else { return nil }
        switch type {
        case is Int.Type: return Int(exactly: integer) as? T
        case is Int8.Type: return Int8(exactly: integer) as? T
        case is Int16.Type: return Int16(exactly: integer) as? T
        case is Int32.Type: return Int32(exactly: integer) as? T
        case is Int64.Type: return Int64(exactly: integer) as? T
        case is UInt.Type: return UInt(exactly: integer) as? T
        case is UInt8.Type: return UInt8(exactly: integer) as? T
        case is UInt16.Type: return UInt16(exactly: integer) as? T
        case is UInt32.Type: return UInt32(exactly: integer) as? T
        case is UInt64.Type: return UInt64(exactly: integer) as? T
        default: return nil
        }
    }

    private func mismatch<T>(_ type: T.Type) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(type), found \(PrintableText.escaped(value.description, limit: 100))"))
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let members: [String: JSONValue]
        let codingPath: [any CodingKey]
        var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }

        func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

        func decoder(for key: Key) throws -> JSONValueDecoder {
            guard let value = members[key.stringValue] else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no member '\(key.stringValue)'"))
            }
            return JSONValueDecoder(value: value, codingPath: codingPath + [key])
        }

        func decodeNil(forKey key: Key) throws -> Bool { (members[key.stringValue] ?? .null) == .null }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder(for: key).decodeValue(type) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder(for: key).decodeValue(type) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder(for: key).decodeValue(type) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder(for: key).decodeValue(type) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decoder(for: key).decodeValue(type) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder(for: key).decodeValue(type) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder(for: key).decodeValue(type) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder(for: key).decodeValue(type) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decoder(for: key).decodeValue(type) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder(for: key).decodeValue(type) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder(for: key).decodeValue(type) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder(for: key).decodeValue(type) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder(for: key).decodeValue(type) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder(for: key).decodeValue(type) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decoder(for: key).decode(type) }
        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try decoder(for: key).container(keyedBy: type)
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try decoder(for: key).unkeyedContainer() }
        func superDecoder() throws -> any Decoder { JSONValueDecoder(value: members["super"] ?? .null, codingPath: codingPath) }
        func superDecoder(forKey key: Key) throws -> any Decoder { JSONValueDecoder(value: members[key.stringValue] ?? .null, codingPath: codingPath + [key]) }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        let elements: [JSONValue]
        let codingPath: [any CodingKey]
        var currentIndex = 0
        var count: Int? { elements.count }
        var isAtEnd: Bool { currentIndex >= elements.count }

        init(elements: [JSONValue], codingPath: [any CodingKey]) {
            self.elements = elements
            self.codingPath = codingPath
        }

        mutating func nextDecoder() throws -> JSONValueDecoder {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(JSONValue.self, .init(codingPath: codingPath, debugDescription: "past the end of the array"))
            }
            defer { currentIndex += 1 }
            return JSONValueDecoder(value: elements[currentIndex], codingPath: codingPath + [IndexKey(intValue: currentIndex)])
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd, elements[currentIndex] == .null else { return false }
            currentIndex += 1
            return true
        }
        mutating func decode(_ type: Bool.Type) throws -> Bool { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: String.Type) throws -> String { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: Double.Type) throws -> Double { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: Float.Type) throws -> Float { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: Int.Type) throws -> Int { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try nextDecoder().decodeValue(type) }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try nextDecoder().decodeValue(type) }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try nextDecoder().decode(type) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            try nextDecoder().container(keyedBy: type)
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try nextDecoder().unkeyedContainer() }
        mutating func superDecoder() throws -> any Decoder { try nextDecoder() }
    }
}

/// An array position as a coding key.
struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { String(intValue ?? 0) }
    init(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}
