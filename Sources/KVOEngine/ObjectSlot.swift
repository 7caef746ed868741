import KVOJSON

/// How `ObjectTable` holds one object: packed (its compact JSON text, `PackedObject`) until something
/// writes it, then live (`LiveObject`: its members, changed in place by each write) until the table
/// packs it again. Both payloads are one reference, so a slot is one word (the table's buckets are the
/// 16-byte id and 8 bytes). Each payload also holds the object's last-change revision (`changed`). `vacant` only stands in for a slot whose payload is out being modified.
/// A value type owned by `ObjectTable`; loop thread. `@unchecked Sendable` because a `PackedObject` is
/// immutable once made (the compiler cannot see it through `ManagedBuffer`), and a `LiveObject` is only
/// changed by the table that holds it alone (copied first otherwise), on the loop thread.
package enum ObjectSlot: @unchecked Sendable {
    case packed(PackedObject)
    case live(LiveObject)
    case vacant

    /// The revision of the object's last change.
    var changed: UInt64 {
        switch self {
        case let .packed(packed): return packed.changed
        case let .live(live): return live.changed
        case .vacant: preconditionFailure("a vacant object slot was read")
        }
    }

    /// The object's value (decoded when packed).
    var value: JSONValue {
        switch self {
        case let .packed(packed): return .object(packed.decodedMembers())
        case let .live(live): return .object(live.decodedMembers)
        case .vacant: preconditionFailure("a vacant object slot was read")
        }
    }
}
