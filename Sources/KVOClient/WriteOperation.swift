import KVOJSON

/// One write of one object as the protocol sends it: its `op` and fields, conditions included. What each
/// of `KVOClient`'s write methods sends alone, and what a `KVOBatch` gathers for `KVOClient.batch`.
/// A value; any thread.
public struct WriteOperation: Sendable, Equatable {
    /// The wire `op`.
    public let op: String
    /// Every field but `op` (and `id`).
    public let params: [String: JSONValue]

    private init(_ op: String, _ params: [String: JSONValue], _ conditions: [WriteCondition]) throws(KVODError) {
        var params = params
        try WriteCondition.add(conditions, to: &params)
        self.op = op
        self.params = params
    }

    /// The request object as a batch's part (`op` and the fields).
    var part: JSONValue {
        var fields = params
        fields["op"] = .string(op)
        return .object(fields)
    }

    /// `create`: `values` (an `Encodable` that encodes as a JSON object), optionally of `class`, and with
    /// `ttl` a time to live (docs/protocol.md, "Expiry": deleted once it passes without a write or `touch`).
    /// `ephemeral`: deleted when the client's session ends (docs/protocol.md, "Presence"; not in a batch).
    public static func create(_ object: String, values: some Encodable = [String: JSONValue](), class className: String? = nil,
                              ttl: Duration? = nil, ephemeral: Bool = false,
                              if conditions: [WriteCondition] = []) throws(KVODError) -> WriteOperation {
        var params: [String: JSONValue] = ["object": .string(object), "values": try ValueCoding.encode(values)]
        if let className { params["class"] = .string(className) }
        if let ttl { params["ttl"] = WriteOperation.seconds(ttl) }
        if ephemeral { params["ephemeral"] = .bool(true) }
        return try WriteOperation("create", params, conditions)
    }

    /// A duration as the protocol's `ttl`: seconds, an integer when whole.
    static func seconds(_ duration: Duration) -> JSONValue {
        let (seconds, attoseconds) = duration.components
        return attoseconds == 0 ? .int(seconds) : .double(Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// `delete`.
    public static func delete(_ object: String, if conditions: [WriteCondition] = []) throws(KVODError) -> WriteOperation {
        try WriteOperation("delete", ["object": .string(object)], conditions)
    }

    /// `set` of `keyPath` to `value`; with `ttl`, the object's time to live becomes `ttl` (`.zero`: none).
    public static func set(_ keyPath: String, of object: String, to value: some Encodable, ttl: Duration? = nil,
                           if conditions: [WriteCondition] = []) throws(KVODError) -> WriteOperation {
        var params: [String: JSONValue] = ["object": .string(object), "keyPath": .string(keyPath), "value": try ValueCoding.encode(value)]
        if let ttl { params["ttl"] = WriteOperation.seconds(ttl) }
        return try WriteOperation("set", params, conditions)
    }

    /// `increment` of the number at `keyPath` by `step` (`.int` or `.double`).
    static func increment(_ keyPath: String, of object: String, step: JSONValue,
                          if conditions: [WriteCondition] = []) throws(KVODError) -> WriteOperation {
        try WriteOperation("increment", ["object": .string(object), "keyPath": .string(keyPath), "by": step], conditions)
    }

    /// `increment` by an integer step.
    public static func increment(_ keyPath: String, of object: String, by step: Int64 = 1,
                                 if conditions: [WriteCondition] = []) throws(KVODError) -> WriteOperation {
        try increment(keyPath, of: object, step: .int(step), if: conditions)
    }

    /// `increment` by a fractional step.
    /// Disfavoured, so that an integer literal (`by: -30`) takes the integer step.
    @_disfavoredOverload
    public static func increment(_ keyPath: String, of object: String, by step: Double,
                                 if conditions: [WriteCondition] = []) throws(KVODError) -> WriteOperation {
        try increment(keyPath, of: object, step: .double(step), if: conditions)
    }

    /// `insert` of `values`: at `indexes` (positions in the resulting array), one after another from `index`,
    /// or appended when both are nil.
    public static func insert<Element: Encodable>(_ keyPath: String, of object: String, values: [Element],
                                                  at index: Int? = nil, indexes: ArrayIndexes? = nil,
                                                  if conditions: [WriteCondition] = []) throws(KVODError) -> WriteOperation {
        var params: [String: JSONValue] = [
            "object": .string(object), "keyPath": .string(keyPath),
            "values": .array(try values.map { value throws(KVODError) in try ValueCoding.encode(value) }),
        ]
        if let index { params["index"] = .int(Int64(index)) }
        if let indexes { params["indexes"] = .array(indexes.map { .int(Int64($0)) }) }
        return try WriteOperation("insert", params, conditions)
    }

    /// `remove` of the elements at `indexes` (positions in the current array).
    public static func remove(_ keyPath: String, of object: String, indexes: ArrayIndexes,
                              if conditions: [WriteCondition] = []) throws(KVODError) -> WriteOperation {
        try WriteOperation("remove", ["object": .string(object), "keyPath": .string(keyPath),
                                      "indexes": .array(indexes.map { .int(Int64($0)) })], conditions)
    }

    /// `replace` of the elements at `indexes` with `values`, matched in order.
    public static func replace<Element: Encodable>(_ keyPath: String, of object: String, indexes: ArrayIndexes,
                                                   with values: [Element],
                                                   if conditions: [WriteCondition] = []) throws(KVODError) -> WriteOperation {
        try WriteOperation("replace", [
            "object": .string(object), "keyPath": .string(keyPath), "indexes": .array(indexes.map { .int(Int64($0)) }),
            "values": .array(try values.map { value throws(KVODError) in try ValueCoding.encode(value) }),
        ], conditions)
    }
}
