import KVOJSON

/// The writes of one `KVOClient.batch`, gathered in order. Each method takes the same arguments as the
/// client's write of that name. A value; any thread.
public struct KVOBatch: Sendable {
    /// The writes, in order.
    public private(set) var operations: [WriteOperation] = []

    /// An empty batch (`KVOClient.batch(_:)` makes one for its closure).
    public init() {}

    /// Adds any write.
    public mutating func add(_ operation: WriteOperation) {
        operations.append(operation)
    }

    public mutating func create(_ object: String, values: some Encodable = [String: JSONValue](), class className: String? = nil,
                                ttl: Duration? = nil, if conditions: [WriteCondition] = []) throws(KVODError) {
        add(try .create(object, values: values, class: className, ttl: ttl, if: conditions))
    }

    public mutating func delete(_ object: String, if conditions: [WriteCondition] = []) throws(KVODError) {
        add(try .delete(object, if: conditions))
    }

    public mutating func set(_ keyPath: String, of object: String, to value: some Encodable, ttl: Duration? = nil,
                             if conditions: [WriteCondition] = []) throws(KVODError) {
        add(try .set(keyPath, of: object, to: value, ttl: ttl, if: conditions))
    }

    /// `set` through a typed key path (its name as `KVOClient.keyPathName` gives it).
    public mutating func set<Root: Decodable, Value: Encodable>(_ keyPath: KeyPath<Root, Value>, of object: String, to value: Value,
                                                                 if conditions: [WriteCondition] = []) throws {
        add(try .set(try KeyPathNaming.name(of: keyPath), of: object, to: value, if: conditions))
    }

    public mutating func increment(_ keyPath: String, of object: String, by step: Int64 = 1,
                                   if conditions: [WriteCondition] = []) throws(KVODError) {
        add(try .increment(keyPath, of: object, by: step, if: conditions))
    }

    /// Disfavoured, so that an integer literal (`by: -30`) takes the integer step.
    @_disfavoredOverload
    public mutating func increment(_ keyPath: String, of object: String, by step: Double,
                                   if conditions: [WriteCondition] = []) throws(KVODError) {
        add(try .increment(keyPath, of: object, by: step, if: conditions))
    }

    public mutating func insert<Element: Encodable>(_ keyPath: String, of object: String, values: [Element],
                                                    at index: Int? = nil, indexes: ArrayIndexes? = nil,
                                                    if conditions: [WriteCondition] = []) throws(KVODError) {
        add(try .insert(keyPath, of: object, values: values, at: index, indexes: indexes, if: conditions))
    }

    public mutating func remove(_ keyPath: String, of object: String, indexes: ArrayIndexes,
                                if conditions: [WriteCondition] = []) throws(KVODError) {
        add(try .remove(keyPath, of: object, indexes: indexes, if: conditions))
    }

    public mutating func replace<Element: Encodable>(_ keyPath: String, of object: String, indexes: ArrayIndexes,
                                                     with values: [Element], if conditions: [WriteCondition] = []) throws(KVODError) {
        add(try .replace(keyPath, of: object, indexes: indexes, with: values, if: conditions))
    }
}

/// What an applied batch answers: its one revision, and each part's own reply without `rev` (`[:]` for
/// most writes, `["value": …]` for an `increment`), in order.
public struct KVOBatchResult: Sendable, Equatable {
    public let rev: Int64
    public let results: [[String: JSONValue]]
}

extension KVOClient {
    /// Applies the writes `build` adds, all or nothing, with one revision (docs/protocol.md, "Batches"):
    /// observers never see a state between two of them. A refused part refuses the whole batch: the error is
    /// that part's (`KVODError.server`), with its index in `details.part`, and nothing was written.
    ///
    /// ```swift
    /// try await kvod.batch { batch in
    ///     try batch.increment("balance", of: "alice", by: -30, if: [.equals("balance", 100)])
    ///     try batch.increment("balance", of: "bob", by: 30)
    /// }
    /// ```
    @discardableResult
    public func batch(_ build: (inout KVOBatch) throws -> Void) async throws -> KVOBatchResult {
        var writes = KVOBatch()
        try build(&writes)
        return try await batch(writes.operations)
    }

    /// Applies `operations` as one batch (see `batch(_:)`).
    @discardableResult
    public func batch(_ operations: [WriteOperation]) async throws -> KVOBatchResult {
        let reply = try await request("batch", ["ops": .array(operations.map(\.part))], isWrite: true)
        guard let rev = reply["rev"]?.intValue, case let .array(results)? = reply["results"] else {
            throw KVODError.malformedReply("a 'batch' reply without rev or results")
        }
        return KVOBatchResult(rev: rev, results: results.map { $0.objectValue ?? [:] })
    }
}
