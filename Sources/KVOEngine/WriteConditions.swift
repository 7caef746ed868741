import KVOJSON
import KVOModel

/// What must hold when a write applies (docs/protocol.md, "Conditional writes"), or nothing applies and
/// the reply is `conflict`: the optimistic-concurrency half of etcd's `Txn` compares (`ifRev` is its
/// `mod_revision` compare), NATS KV's `update` and Firebase's `transaction()`. Every condition is about the
/// write's own object.
///
/// Checked by `KVOEngine.check(_:on:access:)` in the same loop turn as the write it guards, so nothing can
/// change between the check and the write; in cluster mode every node checks it at the same stream position
/// (the request line carries it), so every node decides alike. A value; any thread.
public struct WriteConditions: Equatable, Sendable {
    /// `ifExists: true` / `ifAbsent: true`.
    public enum Existence: Equatable, Sendable {
        case mustExist
        case mustBeAbsent
    }

    /// `ifEquals: {"keyPath": …, "value": …}`: the value at `keyPath` of the object equals `value`, with
    /// the engine's equality (numbers by value, `3 == 3.0`); the value is read as `get` reads it (a missing
    /// key is null).
    public struct ValueCondition: Equatable, Sendable {
        public var keyPath: KeyPath
        public var value: JSONValue

        public init(keyPath: KeyPath, value: JSONValue) {
            self.keyPath = keyPath
            self.value = value
        }
    }

    public var existence: Existence?
    public var equals: ValueCondition?
    /// `ifRev: R`: the object exists and has not changed after revision R (its last change, creation
    /// included, is at R or before: `KVOEngine.changedRevision(of:)`, `changedRev` in `get`'s reply).
    public var unchangedSince: UInt64?

    public init(existence: Existence? = nil, equals: ValueCondition? = nil, unchangedSince: UInt64? = nil) {
        self.existence = existence
        self.equals = equals
        self.unchangedSince = unchangedSince
    }

    /// Whether no condition is set.
    public var isEmpty: Bool { existence == nil && equals == nil && unchangedSince == nil }
}

extension KVOEngine {
    /// Refuses with `conflict` unless every condition of `conditions` holds for `object` now; changes
    /// nothing. What a condition looks at is read with the caller's rights, as any read is: `read` on the
    /// object first (existence is what `ifExists` and `ifAbsent` would tell), and `ifEquals`' key path
    /// through `KeyPathEvaluator` with the reader (references followed are checked too), so a writer that
    /// may not read learns nothing from a conflict. Loop thread.
    public func check(_ conditions: WriteConditions, on object: String, access: ConnectionAccess?) throws(KVOError) {
        try access?.require(.read, on: object)
        let exists = objects.contains(object)
        switch conditions.existence {
        case .mustExist? where !exists:
            throw conflict("ifExists", "object '\(PrintableText.escaped(object, limit: 64))' does not exist", ["exists": false])
        case .mustBeAbsent? where exists:
            throw conflict("ifAbsent", "object '\(PrintableText.escaped(object, limit: 64))' exists", ["exists": true])
        default:
            break
        }
        if let since = conditions.unchangedSince {
            guard let changed = objects.changedRevision(of: object) else {
                throw conflict("ifRev", "object '\(PrintableText.escaped(object, limit: 64))' does not exist", ["exists": false])
            }
            guard changed <= since else {
                throw conflict("ifRev", "object '\(PrintableText.escaped(object, limit: 64))' changed at revision \(changed), after \(since)",
                               ["changedRev": .int(Int64(changed))])
            }
        }
        guard let equals = conditions.equals else { return }
        let keyPathText = PrintableText.escaped(equals.keyPath.string, limit: 64)
        guard exists else {
            throw conflict("ifEquals", "'\(keyPathText)' of object '\(PrintableText.escaped(object, limit: 64))': the object does not exist",
                           ["exists": false])
        }
        // Read as `get` reads it (a missing key is null; a path through a non-object is `type_mismatch`).
        let current = try get(object, keyPath: equals.keyPath, access: access)
        guard current == equals.value else {
            throw conflict("ifEquals", "'\(keyPathText)' of object '\(PrintableText.escaped(object, limit: 64))' is not the expected value",
                           ["value": current])
        }
    }

    private func conflict(_ condition: String, _ message: String, _ details: [String: JSONValue]) -> KVOError {
        var details = details
        details["condition"] = .string(condition)
        details["rev"] = .int(Int64(revision))
        return KVOError(.conflict, "\(condition) does not hold: \(message); nothing was written", details: details)
    }
}
