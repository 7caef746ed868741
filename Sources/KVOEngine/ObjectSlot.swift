import KVOJSON

/// How `ObjectTable` holds one object: packed (its compact JSON text, `PackedObject`) until something
/// writes it, then live (`LiveObject`: its members, changed in place by each write) until the table
/// packs it again. Both payloads are one reference, so a slot is one word (the table's buckets are the
/// 16-byte id and an `ObjectEntry`: the slot and the object's last-change revision, 16 bytes). `vacant` only stands in for a slot whose payload is out being modified.
/// A value type owned by `ObjectTable`; loop thread. `@unchecked Sendable` because a `PackedObject` is
/// immutable once made (the compiler cannot see it through `ManagedBuffer`), and a `LiveObject` is only
/// changed by the table that holds it alone (copied first otherwise), on the loop thread.
package enum ObjectSlot: @unchecked Sendable {
    case packed(PackedObject)
    case live(LiveObject)
    case vacant

    /// The object's value (decoded when packed).
    var value: JSONValue {
        switch self {
        case let .packed(packed): return .object(packed.decodedMembers())
        case let .live(live): return .object(live.decodedMembers)
        case .vacant: preconditionFailure("a vacant object slot was read")
        }
    }
}

/// One id's entry in `ObjectTable`: how the object is held, and the revision of its last change (its
/// creation or a write to it), which `ifRev` conditions compare (docs/protocol.md, "Conditional writes").
/// 16 bytes, as the slot alone was 8: the revision is the object's, whatever the slot holds, so packing and
/// unpacking never touch it. A value; loop thread, like the table.
package struct ObjectEntry: @unchecked Sendable {
    var slot: ObjectSlot
    var changed: UInt64
}
