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
/// Values are written with their members in sorted order and without spaces, which is how kvod writes them
/// back in events, so a subscriber finds the published bytes verbatim in the event's `new`. A value type;
/// any thread.
struct SetShape: Equatable, CustomStringConvertible {
    enum Value: Equatable {
        case string
        /// A JSON object of this many members (3 … 10), one of them an object itself.
        case object(members: Int)
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
        ("object3-id", SetShape(value: .object(members: 3), withID: true, nested: false)),
        ("object10-id", SetShape(value: .object(members: 10), withID: true, nested: false)),
        ("object3-id-nested", SetShape(value: .object(members: 3), withID: true, nested: true)),
        ("string-id-nested", SetShape(value: .string, withID: true, nested: true)),
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
        case .object(let members): return Payload.objectOverhead + 7 * (members - 2)
        }
    }

    /// The value size a matrix cell uses for a requested size: at least the shape's minimum (a ten-member
    /// object does not fit in 64 bytes).
    func bytes(forRequested requested: Int) -> Int {
        max(requested, minimumBytes)
    }
}
