/// Finds the top-level keys a `Decodable` type reads, by decoding it once from a recording decoder that
/// answers every request with a placeholder (empty strings and arrays, zeros, `false`, absent optionals)
/// and records each key asked of the outermost keyed container. Stateless; any thread.
///
/// Works for the types the compiler synthesises `Decodable` for, and for hand-written `init(from:)`s that
/// read their keys from a keyed container. It cannot work for a type whose decoding refuses the
/// placeholders (an enum with a raw value that is not `""`/`0`, a validating initialiser) or that reads
/// `allKeys` (a dictionary at the top): `RemoteObject` then needs its keys given explicitly.
enum TopLevelKeys {
    /// The keys `type` decodes at its top level, in the order it asks for them (each once).
    static func of<Value: Decodable>(_ type: Value.Type) throws(KVODError) -> [String] {
        let recorder = KeyRecorder()
        do {
            _ = try Value(from: PlaceholderDecoder(recorder: recorder, depth: 0, codingPath: []))
        } catch {
            throw .coding("cannot find the keys \(Value.self) decodes (\(error)); pass them with keys:")
        }
        if recorder.keys.isEmpty {
            throw .coding("\(Value.self) decodes no keyed container; pass its keys with keys:")
        }
        return recorder.keys
    }
}

/// The keys recorded so far. One decoding, one thread.
private final class KeyRecorder {
    var keys: [String] = []
    func record(_ key: String) {
        if !keys.contains(key) { keys.append(key) }
    }
}

/// A decoder that yields placeholders; records the keys of the top level (depth 0).
private struct PlaceholderDecoder: Decoder {
    let recorder: KeyRecorder
    let depth: Int
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(PlaceholderKeyedContainer<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        PlaceholderUnkeyedContainer(codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        PlaceholderValue(decoder: self)
    }

    /// A decoder one level down (nested values are not recorded; deep nesting stops with an error).
    func nested(_ key: any CodingKey) throws -> PlaceholderDecoder {
        guard depth < 32 else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "nested too deeply"))
        }
        return PlaceholderDecoder(recorder: recorder, depth: depth + 1, codingPath: codingPath + [key])
    }
}

private struct PlaceholderKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: PlaceholderDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] { [] }

    private func record(_ key: Key) {
        if decoder.depth == 0 { decoder.recorder.record(key.stringValue) }
    }

    func contains(_ key: Key) -> Bool {
        record(key)
        return false
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        record(key)
        return true
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        record(key)
        return try T(from: decoder.nested(key))
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        record(key)
        return nil
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        record(key)
        return try decoder.nested(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        record(key)
        return PlaceholderUnkeyedContainer(codingPath: codingPath + [key])
    }

    func superDecoder() throws -> any Decoder { decoder }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        record(key)
        return try decoder.nested(key)
    }
}

/// An empty array.
private struct PlaceholderUnkeyedContainer: UnkeyedDecodingContainer {
    let codingPath: [any CodingKey]
    var count: Int? { 0 }
    var isAtEnd: Bool { true }
    var currentIndex: Int { 0 }

    private func end() -> DecodingError {
        .valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "placeholder array is empty"))
    }

    mutating func decodeNil() throws -> Bool { true }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { throw end() }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> { throw end() }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { throw end() }
    mutating func superDecoder() throws -> any Decoder { throw end() }
}

/// A single placeholder value: zero, `false`, `""`, or a nested placeholder decoding.
private struct PlaceholderValue: SingleValueDecodingContainer {
    let decoder: PlaceholderDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { false }
    func decode(_ type: Bool.Type) throws -> Bool { false }
    func decode(_ type: String.Type) throws -> String { "" }
    func decode(_ type: Double.Type) throws -> Double { 0 }
    func decode(_ type: Float.Type) throws -> Float { 0 }
    func decode(_ type: Int.Type) throws -> Int { 0 }
    func decode(_ type: Int8.Type) throws -> Int8 { 0 }
    func decode(_ type: Int16.Type) throws -> Int16 { 0 }
    func decode(_ type: Int32.Type) throws -> Int32 { 0 }
    func decode(_ type: Int64.Type) throws -> Int64 { 0 }
    func decode(_ type: UInt.Type) throws -> UInt { 0 }
    func decode(_ type: UInt8.Type) throws -> UInt8 { 0 }
    func decode(_ type: UInt16.Type) throws -> UInt16 { 0 }
    func decode(_ type: UInt32.Type) throws -> UInt32 { 0 }
    func decode(_ type: UInt64.Type) throws -> UInt64 { 0 }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: decoder) }
}
