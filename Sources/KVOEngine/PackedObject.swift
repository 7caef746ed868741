import KVOJSON

/// One stored object kept as its compact JSON text (exactly what `JSONWriter` writes for it, keys
/// sorted) in a single tail-allocated buffer: a 16-byte object header, a 12-byte `PackedHeader` (the
/// revision of the object's last change and the text's length), then the text.
/// Also holds a restored history entry's change (`HistoryEntry`: the text of its `json` object).
///
/// Immutable once made, so it may be shared (the same buffer is in the engine's table and in a
/// `PersistedState` that restored it) and sent between threads (`ManagedBuffer` is marked not `Sendable`,
/// so `ObjectSlot` states it instead). Decoding it gives back exactly the
/// value that was encoded: the text is `JSONWriter`'s own output (`CanonicalObjectScan` checked it, or
/// it was just written), and `JSONParser` reads that output back to an equal value with the same
/// number kinds (integers stay `.int`, non-integral numbers `.double`, `-0.0` stays `-0.0`).
package final class PackedObject: ManagedBuffer<PackedHeader, UInt8> {
    /// A buffer holding a copy of `text`, which must be `JSONWriter`'s encoding of an object, last changed at
    /// revision `changed` (0: unknown, or not an object's: a history entry's change).
    package static func make(copying text: UnsafeBufferPointer<UInt8>, changed: UInt64 = 0) -> PackedObject {
        precondition(text.count <= Int(UInt32.max), "an object's text is at most 4 GiB")
        let buffer = PackedObject.create(minimumCapacity: text.count) { _ in
            PackedHeader(changed: changed, count: UInt32(text.count))
        }
        let packed = unsafeDowncast(buffer, to: PackedObject.self)
        packed.withUnsafeMutablePointerToElements { elements in
            if let base = text.baseAddress { elements.initialize(from: base, count: text.count) }
        }
        return packed
    }

    /// A buffer holding `JSONWriter`'s encoding of the object `members`.
    package static func make(encoding members: [String: JSONValue], changed: UInt64 = 0) -> PackedObject {
        let text = JSONWriter.bytes(.object(members))
        return text.withUnsafeBufferPointer { make(copying: $0, changed: changed) }
    }

    /// Bytes of text: the object's size as compact JSON.
    var count: Int { Int(header.count) }

    /// The revision of the object's last change (`ObjectTable.changedRevision(of:)`).
    var changed: UInt64 { header.changed }

    /// The same text, last changed at `changed` (a new buffer: a packed object is immutable).
    func withChanged(_ changed: UInt64) -> PackedObject {
        withText { PackedObject.make(copying: $0, changed: changed) }
    }

    /// Runs `body` on the text.
    func withText<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        try withUnsafeMutablePointerToElements { try body(UnsafeBufferPointer(start: $0, count: count)) }
    }

    /// The object's members, decoded (a new dictionary each call).
    func decodedMembers() -> [String: JSONValue] {
        let value: JSONValue
        do {
            value = try withText { text throws(JSONParseError) in try JSONParser.parse(text) }
        } catch {
            preconditionFailure("a packed object's text does not parse: \(error)")
        }
        guard case let .object(members) = value else { preconditionFailure("a packed object's text is not an object") }
        return members
    }

    /// Appends the text to `buffer` (what `JSONWriter.write` would append for the decoded value).
    func appendText(to buffer: inout [UInt8]) {
        withText { buffer.append(contentsOf: $0) }
    }
}

/// A `PackedObject`'s header: 12 bytes (`ManagedBuffer` puts the text right after the header's size, not its
/// stride), where the length alone was 4: an object's last-change revision costs 8 bytes per packed object,
/// where beside the table's slot it cost 16 (the table's buckets are twice the objects).
package struct PackedHeader {
    var changed: UInt64
    var count: UInt32
}
