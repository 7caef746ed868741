import KVOJSON

/// A condition a write carries (docs/protocol.md, "Conditional writes"): the server applies the write only
/// if every condition holds at that moment, and otherwise refuses it with `KVODError.server(.conflict, …)`,
/// whose details say which condition failed and what is there now. The building block of `update`.
///
/// ```swift
/// try await kvod.create("lock", values: ["holder": me], if: [.absent])
/// try await kvod.set("balance", of: "acct", to: 90, if: [.equals("balance", 100)])
/// ```
///
/// A value; any thread.
public struct WriteCondition: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case exists
        case absent
        case equals(keyPath: String, value: JSONValue)
        case unchangedSince(Int64)
    }

    let kind: Kind

    /// The object exists (`ifExists`).
    public static let exists = WriteCondition(kind: .exists)
    /// The object does not exist (`ifAbsent`).
    public static let absent = WriteCondition(kind: .absent)

    /// The object exists and has not changed after revision `rev` (`ifRev`): any `rev` the caller saw when
    /// it read (a `get`'s, a write's or an event's) guards a whole-object read-modify-write.
    public static func unchangedSince(_ rev: Int64) -> WriteCondition {
        WriteCondition(kind: .unchangedSince(rev))
    }

    /// The value at `keyPath` of the object equals `value` (`ifEquals`), as kvod compares values: numbers by
    /// value (`3 == 3.0`), a missing key as null. Throws `KVODError.coding` when `value` does not encode.
    public static func equals(_ keyPath: String, _ value: some Encodable) throws(KVODError) -> WriteCondition {
        WriteCondition(kind: .equals(keyPath: keyPath, value: try ValueCoding.encode(value)))
    }

    /// Adds `conditions` to a write's parameters. The protocol takes one of each field, so a second `equals`
    /// or `unchangedSince` would silently replace the first: it is refused instead (`KVODError.coding`).
    static func add(_ conditions: [WriteCondition], to params: inout [String: JSONValue]) throws(KVODError) {
        for condition in conditions {
            let field: String
            let value: JSONValue
            switch condition.kind {
            case .exists: (field, value) = ("ifExists", true)
            case .absent: (field, value) = ("ifAbsent", true)
            case let .equals(keyPath, expected): (field, value) = ("ifEquals", ["keyPath": .string(keyPath), "value": expected])
            case let .unchangedSince(rev): (field, value) = ("ifRev", .int(rev))
            }
            guard params.updateValue(value, forKey: field) == nil else {
                throw .coding("a write takes one '\(field)' condition (docs/protocol.md, \"Conditional writes\")")
            }
        }
    }
}
