import KVOJSON

/// Encodes an `Encodable` straight into a `JSONValue` (no text in between): how `KVOClient` turns the
/// user's values into request parameters. Containers are built as a small tree of slots and read out at
/// the end (`encode`). Used by one thread at a time for one value.
struct JSONValueEncoder: Encoder, SingleValueEncodingContainer {
    /// Where one value goes: a finished value, or an object or array still being filled.
    final class Slot {
        enum Node {
            case value(JSONValue)
            case object(Members)
            case array(Elements)
        }
        var node: Node = .value(.null)

        var json: JSONValue {
            switch node {
            case let .value(value): return value
            case let .object(members): return .object(members.slots.mapValues(\.json))
            case let .array(elements): return .array(elements.slots.map(\.json))
            }
        }
    }

    final class Members { var slots: [String: Slot] = [:] }
    final class Elements { var slots: [Slot] = [] }

    let slot: Slot
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// `value` as JSON.
    static func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        var encoder = JSONValueEncoder(slot: Slot(), codingPath: [])
        try encoder.encode(value)
        return encoder.slot.json
    }

    static func integer<T: BinaryInteger>(_ value: T, _ codingPath: [any CodingKey]) throws -> JSONValue {
        guard let exact = Int64(exactly: value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "\(value) does not fit a 64-bit JSON integer"))
        }
        return .int(exact)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let members: Members
        if case let .object(existing) = slot.node { members = existing } else {
            members = Members()
            slot.node = .object(members)
        }
        return KeyedEncodingContainer(Keyed<Key>(members: members, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let elements: Elements
        if case let .array(existing) = slot.node { elements = existing } else {
            elements = Elements()
            slot.node = .array(elements)
        }
        return Unkeyed(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    mutating func encodeNil() throws { slot.node = .value(.null) }
    mutating func encode(_ value: Bool) throws { slot.node = .value(.bool(value)) }
    mutating func encode(_ value: String) throws { slot.node = .value(.string(value)) }
    mutating func encode(_ value: Double) throws { slot.node = .value(.double(Double(value))) }
    mutating func encode(_ value: Float) throws { slot.node = .value(.double(Double(value))) }
    mutating func encode(_ value: Int) throws { slot.node = .value(try JSONValueEncoder.integer(value, codingPath)) }
    mutating func encode(_ value: Int8) throws { slot.node = .value(try JSONValueEncoder.integer(value, codingPath)) }
    mutating func encode(_ value: Int16) throws { slot.node = .value(try JSONValueEncoder.integer(value, codingPath)) }
    mutating func encode(_ value: Int32) throws { slot.node = .value(try JSONValueEncoder.integer(value, codingPath)) }
    mutating func encode(_ value: Int64) throws { slot.node = .value(try JSONValueEncoder.integer(value, codingPath)) }
    mutating func encode(_ value: UInt) throws { slot.node = .value(try JSONValueEncoder.integer(value, codingPath)) }
    mutating func encode(_ value: UInt8) throws { slot.node = .value(try JSONValueEncoder.integer(value, codingPath)) }
    mutating func encode(_ value: UInt16) throws { slot.node = .value(try JSONValueEncoder.integer(value, codingPath)) }
    mutating func encode(_ value: UInt32) throws { slot.node = .value(try JSONValueEncoder.integer(value, codingPath)) }
    mutating func encode(_ value: UInt64) throws { slot.node = .value(try JSONValueEncoder.integer(value, codingPath)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        if let json = value as? JSONValue {
            slot.node = .value(json)
        } else {
            try value.encode(to: self)
        }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let members: Members
        let codingPath: [any CodingKey]

        func child(_ key: Key) -> Slot {
            let slot = Slot()
            members.slots[key.stringValue] = slot
            return slot
        }

        mutating func encodeNil(forKey key: Key) throws { child(key).node = .value(.null) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: String, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: Double, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: Float, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: Int, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]); try single.encode(value) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            var single = JSONValueEncoder(slot: child(key), codingPath: codingPath + [key])
            try single.encode(value)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]).container(keyedBy: keyType)
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]).unkeyedContainer()
        }
        mutating func superEncoder() -> any Encoder {
            let slot = Slot()
            members.slots["super"] = slot
            return JSONValueEncoder(slot: slot, codingPath: codingPath)
        }
        mutating func superEncoder(forKey key: Key) -> any Encoder { JSONValueEncoder(slot: child(key), codingPath: codingPath + [key]) }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let elements: Elements
        let codingPath: [any CodingKey]
        var count: Int { elements.slots.count }

        func nextSlot() -> Slot {
            let slot = Slot()
            elements.slots.append(slot)
            return slot
        }

        mutating func encodeNil() throws { nextSlot().node = .value(.null) }
        mutating func encode(_ value: Bool) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: String) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: Double) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: Float) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: Int) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: Int8) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: Int16) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: Int32) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: Int64) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: UInt) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: UInt8) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: UInt16) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: UInt32) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode(_ value: UInt64) throws { var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath); try single.encode(value) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            var single = JSONValueEncoder(slot: nextSlot(), codingPath: codingPath)
            try single.encode(value)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            JSONValueEncoder(slot: nextSlot(), codingPath: codingPath).container(keyedBy: keyType)
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            JSONValueEncoder(slot: nextSlot(), codingPath: codingPath).unkeyedContainer()
        }
        mutating func superEncoder() -> any Encoder { JSONValueEncoder(slot: nextSlot(), codingPath: codingPath) }
    }
}
