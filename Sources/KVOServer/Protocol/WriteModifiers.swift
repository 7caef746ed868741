import KVOEngine
import KVOJSON
import KVOModel

/// What a write may carry besides its operation's own fields (docs/protocol.md, "Conditional writes", "Expiry",
/// "Presence"): its conditions, its time to live and whether its object is ephemeral. One value: the decoder reads
/// it from the fields its row accepts (`OperationDeclaration.modifiers`), `RequestHandler` applies the conditions and
/// the ttl in the write's turn, and the server's write path (`Server.applyWrite`) ties an ephemeral object to its
/// session. Adding a modifier is a member here, its kind, its reading in `read(from:)`, its effect in those two
/// places, and the row flags that accept it.
///
/// A value; any thread.
package struct WriteModifiers: Equatable, Sendable {
    /// `ifExists`, `ifAbsent`, `ifEquals`, `ifRev`: checked on the write's object in the same turn, before the
    /// write (a `conflict` when one does not hold). Nil: none.
    package var conditions: WriteConditions?
    /// `ttl`: the object's time to live in milliseconds, set in the same turn after the write (0: no expiry). Nil:
    /// the write leaves the object's ttl as it is.
    package var ttl: Int64?
    /// `ephemeral: true`: the object is deleted when the writer's session ends.
    package var ephemeral = false

    package init(conditions: WriteConditions? = nil, ttl: Int64? = nil, ephemeral: Bool = false) {
        self.conditions = conditions
        self.ttl = ttl
        self.ephemeral = ephemeral
    }

    package var isEmpty: Bool { conditions == nil && ttl == nil && !ephemeral }

    /// The modifiers of a request line whose row accepts `kinds` (the row's field check has already refused any
    /// other): nil when it carries none. Called only when the line's field bits name one (`RequestField.writeModifierBits`),
    /// so that a plain write pays one AND.
    static func read(from reader: FieldReader, present fields: UInt64) throws(KVOError) -> WriteModifiers? {
        var modifiers = WriteModifiers()
        if fields & RequestField.ttl.bit != 0 { modifiers.ttl = try reader.ttl() }
        if fields & RequestField.mask(RequestField.conditions) != 0 { modifiers.conditions = try reader.writeConditions() }
        if fields & RequestField.ephemeral.bit != 0 { modifiers.ephemeral = try reader.optionalBool("ephemeral") ?? false }
        return modifiers.isEmpty ? nil : modifiers
    }
}

/// Which modifiers a row accepts (`OperationDeclaration.modifiers`): each kind adds its fields to the row.
/// A value; any thread.
package struct WriteModifierKinds: OptionSet, Sendable {
    package let rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }

    /// `ifExists`, `ifAbsent`, `ifEquals`, `ifRev`: the writes of one object.
    package static let conditions = WriteModifierKinds(rawValue: 1 << 0)
    /// `ttl`: the writes that give an object its value.
    package static let ttl = WriteModifierKinds(rawValue: 1 << 1)
    /// `ephemeral`: the write that makes an object.
    package static let ephemeral = WriteModifierKinds(rawValue: 1 << 2)

    /// The fields these kinds add to a row, in the order the documentation lists them.
    var fields: [FieldDeclaration] {
        var fields: [FieldDeclaration] = []
        if contains(.conditions) {
            fields += [.optional(.ifExists, .onlyTrue), .optional(.ifAbsent, .onlyTrue), .optional(.ifEquals, .object),
                       .optional(.ifRev, .integer)]
        }
        if contains(.ttl) { fields.append(.optional(.ttl, .seconds)) }
        if contains(.ephemeral) { fields.append(.optional(.ephemeral, .boolean)) }
        return fields
    }
}
