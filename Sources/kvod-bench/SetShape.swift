/// What one benchmark set looks like (issue 13): the value's shape, whether the request carries an `id`,
/// and whether the key path is `v` or the nested `a.b.c`. The same value bytes go to Redis as the PUBLISH
/// payload, so both servers carry the same bytes per message.
///
///     string           {"op":"set","object":"bench","keyPath":"v","value":"<B bytes>"}       (issue 5's cell)
///     string-id        {"id":N,"op":"set",...,"value":"<B bytes>"}
///     object3-id       {"id":N,...,"value":{"h":"<32 hex>","m1":{"n":"x…"},"m2":2}}           (B bytes of JSON)
///     object10-id      ... ten members: "h", "m1" (an object of one member), "m2" … "m9" (small integers)
///     object3-id-nested  object3-id at key path a.b.c (the object is created as {"a":{"b":{"c":""}}})
///
/// Those values are written with their members in sorted order and without spaces, which is how kvod writes
/// them back in events (canonical form), so a subscriber finds the published bytes verbatim in the event's `new`.
/// The shapes of issue 44 write the same values as clients do (`ObjectForm`), each beside its canonical twin:
///
///     object3-unsorted-id   object3-id's value with its members in reverse order (JSON.stringify, json.dumps)
///     object10-unsorted-id  object10-id's likewise
///     object3-float-id      object3-id with "m2":2.5 (two filler bytes fewer)
///     object3-utf8-id       object3-id whose "n" starts "café / " (canonical form, raw UTF-8)
///     object3-escaped-id    object3-utf8-id's value as json.dumps and JSONEncoder escape it: "caf\u00e9 \/ "
///     object3-client-id     reverse order, "m2":2.5 and the escapes at once
///
/// B is the bytes of the canonical form, which the subscribers find in the event; the request carries the
/// client's form (as many bytes, or five more with the escapes). A value type; any thread.
struct SetShape: Equatable, CustomStringConvertible {
    enum Value: Equatable {
        case string
        /// A JSON object of this many members (3 … 10), one of them an object itself, written in `form`.
        case object(members: Int, form: ObjectForm)
    }

    /// How a client writes an object value (issue 44): in canonical form, or as clients do.
    enum ObjectForm: Equatable {
        /// Members in ascending order, integers, no escapes: what kvod writes back.
        case canonical
        /// The canonical value with its members in reverse order.
        case unsorted
        /// `m2` is 2.5, not 2.
        case float
        /// `m1.n` starts with "café / " written raw (still canonical).
        case utf8
        /// `m1.n` starts with "café / " written `caf\u00e9 \/ `.
        case escaped
        /// Reverse order, 2.5 and the escapes.
        case client

        var isUnsorted: Bool { self == .unsorted || self == .client }
        var hasFloat: Bool { self == .float || self == .client }
        /// `m1.n`'s prefix as the request writes it, and as kvod writes it back.
        var prefix: (sent: StaticString, canonical: StaticString)? {
            switch self {
            case .utf8: return ("café / ", "café / ")
            case .escaped, .client: return (#"caf\u00e9 \/ "#, "café / ")
            default: return nil
            }
        }
    }

    var value: Value
    var withID: Bool
    var nested: Bool

    /// Issue 5's cell: a string value at `v`, no `id`.
    static let plainString = SetShape(value: .string, withID: false, nested: false)

    /// The shapes `--shapes` accepts, by name.
    static let named: [(name: String, shape: SetShape)] = [
        ("string", plainString),
        ("string-id", SetShape(value: .string, withID: true, nested: false)),
        ("object3-id", SetShape(value: .object(members: 3, form: .canonical), withID: true, nested: false)),
        ("object10-id", SetShape(value: .object(members: 10, form: .canonical), withID: true, nested: false)),
        ("object3-id-nested", SetShape(value: .object(members: 3, form: .canonical), withID: true, nested: true)),
        ("string-id-nested", SetShape(value: .string, withID: true, nested: true)),
        ("object3-unsorted-id", SetShape(value: .object(members: 3, form: .unsorted), withID: true, nested: false)),
        ("object10-unsorted-id", SetShape(value: .object(members: 10, form: .unsorted), withID: true, nested: false)),
        ("object3-float-id", SetShape(value: .object(members: 3, form: .float), withID: true, nested: false)),
        ("object3-utf8-id", SetShape(value: .object(members: 3, form: .utf8), withID: true, nested: false)),
        ("object3-escaped-id", SetShape(value: .object(members: 3, form: .escaped), withID: true, nested: false)),
        ("object3-client-id", SetShape(value: .object(members: 3, form: .client), withID: true, nested: false)),
    ]

    /// The matrix's issue-13 cells by default (`string` is the S x B matrix's own cell).
    static let matrixDefault = ["string-id", "object3-id", "object10-id", "object3-id-nested"].compactMap(parse)

    static func parse(_ name: String) -> SetShape? {
        named.first { $0.name == name }?.shape
    }

    var description: String {
        SetShape.named.first { $0.shape == self }?.name ?? "custom"
    }

    /// The key path the subscribers observe and the publisher sets.
    var keyPath: [UInt8] { nested ? Array("a.b.c".utf8) : Array("v".utf8) }

    /// The `values` of the object's `create` (kvod): the key path's location holds an empty string.
    var createdValues: [UInt8] { nested ? Array(#"{"a":{"b":{"c":""}}}"#.utf8) : Array(#"{"v":""}"#.utf8) }

    /// The smallest value this shape can carry (its fixed members with no filler).
    var minimumBytes: Int {
        switch value {
        case .string: return Payload.headerLength
        case let .object(members, form): return Payload.objectOverhead + 7 * (members - 2) + Payload.formOverhead(form)
        }
    }

    /// The value size a matrix cell uses for a requested size: at least the shape's minimum (a ten-member
    /// object does not fit in 64 bytes).
    func bytes(forRequested requested: Int) -> Int {
        max(requested, minimumBytes)
    }
}
