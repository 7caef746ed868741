import KVOJSON

/// Every member name a request line may carry, in any operation (docs/protocol.md, "Operations"). A field's
/// `rawValue` is its bit in a row's `OperationDeclaration.acceptedFields`: the decoder maps each member to its
/// field once (`JSONParser.KeyTable` for names of up to eight bytes, `byName` for the rest) and refuses a
/// member whose bit the row lacks with one AND (docs/design.md, "Strict requests"). At most 64 fields.
///
/// A value; any thread.
package enum RequestField: Int, CaseIterable, Sendable {
    case op, id, object, keyPath, value, values, index, indexes, options, sinceRev, sub, pattern
    case `class`, client, now, binding, from, to, limit, after, user, password, token, rules, hashCost
    case atLeastRev, by, ifExists, ifAbsent, ifEquals, ifRev, ops, objects, `where`, ttl, changedRev
    case ephemeral, resume, grace, request, action, events, sources, filter, convert, reduce
    case reset, connection, offset

    /// The wire names, in `rawValue` order.
    package static let names: [String] = allCases.map { "\($0)" }

    /// The wire name.
    package var name: String { RequestField.names[rawValue] }

    /// This field's bit in a set of fields.
    @inline(__always)
    package var bit: UInt64 { 1 << UInt64(rawValue) }

    /// The names of at most eight bytes, for `JSONParser.scanMembers`: a member it finds here has its field's
    /// `rawValue` as `MemberText.keyIndex`.
    static let keys = JSONParser.KeyTable(names)

    /// Every field by name, for the names the key table does not hold (longer than eight bytes, or escaped).
    private static let byName: [String: RequestField] = Dictionary(uniqueKeysWithValues: allCases.map { ($0.name, $0) })

    /// The field called `name`; nil for a name no operation takes.
    static func named(_ name: String) -> RequestField? {
        byName[name]
    }

    /// The field a member of a request line names; nil for a name no operation takes.
    @inline(__always)
    static func of(_ member: JSONParser.MemberText) -> RequestField? {
        if member.keyIndex >= 0 { return RequestField(rawValue: member.keyIndex) }
        return byName[member.key]
    }

    /// The bit of a name no operation takes: in no row's accepted fields (there are fewer than 64 fields).
    static let unknownBit: UInt64 = 1 << 63

    /// The bits of `fields`.
    static func mask(_ fields: [RequestField]) -> UInt64 {
        fields.reduce(0) { $0 | $1.bit }
    }

    /// The write conditions (docs/protocol.md, "Conditional writes").
    static let conditions: [RequestField] = [.ifExists, .ifAbsent, .ifEquals, .ifRev]

    /// The bits of the fields that wrap a write (`conditions`, `ttl`, `ephemeral`): a plain write has none of them.
    static let writeModifierBits: UInt64 = mask(conditions + [.ttl, .ephemeral])
}

/// What a field's value must be: for the documentation, and for the tests that send each field with a value of
/// another type. The row's decoder checks it as it reads the field. A value; any thread.
package enum FieldType: Sendable, Equatable {
    /// A string (`client`, `after`, `user`, …).
    case string
    /// An object id: a non-empty string of at most 1,024 bytes.
    case objectID
    /// A key path (a string).
    case keyPath
    /// An object id pattern (a string; `*` any run of characters).
    case pattern
    /// An expression (a string; docs/protocol.md, "Expressions").
    case expression
    /// A non-negative integer (a revision, an index, a subscription or binding id, an action number).
    case integer
    /// A number (an integer or a finite number).
    case number
    /// A number of seconds (an integer or a finite number) within the field's range.
    case seconds
    /// `true` or `false`.
    case boolean
    /// `true` only (the existence conditions: leave the field out for no condition).
    case onlyTrue
    /// A JSON object.
    case object
    /// A JSON array.
    case array
    /// Any JSON value, `null` included.
    case any
    /// A string, number, boolean or null (`id`).
    case scalar

    /// As the operations table names it.
    package var description: String {
        switch self {
        case .string: "string"
        case .objectID: "object id"
        case .keyPath: "key path"
        case .pattern: "pattern"
        case .expression: "expression"
        case .integer: "integer"
        case .number: "number"
        case .seconds: "seconds"
        case .boolean: "bool"
        case .onlyTrue: "true"
        case .object: "object"
        case .array: "array"
        case .any: "any value"
        case .scalar: "scalar"
        }
    }

    /// For messages: "a string", "an object id", ….
    package var withArticle: String {
        switch self {
        case .any: "any value"
        case .onlyTrue: "true"
        case .objectID, .expression, .integer, .object, .array: "an \(description)"
        default: "a \(description)"
        }
    }

    /// A JSON text of another type, which the field refuses; nil for `any`.
    package var mismatch: String? {
        switch self {
        case .string, .objectID, .keyPath, .pattern, .expression: "1"
        case .integer, .number, .seconds: #""1""#
        case .boolean, .onlyTrue: #""yes""#
        case .object, .array: #""x""#
        case .any: nil
        case .scalar: "{}"
        }
    }
}

/// One field a row of the operations table accepts: its name, its type, whether the request must carry it and
/// whether `null` stands for "absent" (docs/protocol.md, "Requests and replies": only where a row says so;
/// elsewhere a `null` is `bad_request`, except as a value of a field whose type is `any` or `scalar`).
/// A value; any thread.
package struct FieldDeclaration: Sendable {
    package let field: RequestField
    package let type: FieldType
    package let isRequired: Bool
    /// Whether `null` is accepted: a value of an `any` or `scalar` field, or "absent" where the row says so.
    package let acceptsNull: Bool

    static func required(_ field: RequestField, _ type: FieldType) -> FieldDeclaration {
        FieldDeclaration(field: field, type: type, isRequired: true, acceptsNull: type == .any || type == .scalar)
    }

    /// An optional field; `nullMeansAbsent` only where the protocol documents it (`hello`'s `events`).
    static func optional(_ field: RequestField, _ type: FieldType, nullMeansAbsent: Bool = false) -> FieldDeclaration {
        FieldDeclaration(field: field, type: type, isRequired: false,
                         acceptsNull: nullMeansAbsent || type == .any || type == .scalar)
    }
}
