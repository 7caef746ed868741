import KVOJSON

/// The observable object store: objects, the global revision and every observation.
///
/// Pure and synchronous: no I/O, no clocks, no threads. Each call handles one request and appends
/// the notifications it caused to the caller's `notifications` array, in delivery order (all prior
/// notifications of a change before its ordinary ones). A call that throws changes nothing.
/// Not thread-safe: the server's loop thread owns the engine and is its only caller.
public final class KVOEngine {
    /// Revision of the last accepted create, set or delete (0 before any).
    public private(set) var revision: UInt64 = 0
    /// Every object's value; each is a JSON object.
    private var objects: [String: JSONValue] = [:]
    private let registry = ObservationRegistry()

    public init() {}

    /// Number of objects.
    public var objectCount: Int { objects.count }
    /// Number of live observations.
    public var observationCount: Int { registry.count }

    // MARK: - Objects

    /// Creates `object` with `values`; `exists` if it is already there.
    public func create(_ object: String, values: [String: JSONValue]) throws(KVOError) -> UInt64 {
        guard objects[object] == nil else { throw KVOError(.exists, "object '\(object)' already exists") }
        objects[object] = .object(values)
        revision += 1
        return revision
    }

    /// Deletes `object`, ending each of its observations with a `sourceDeleted` notification.
    public func delete(_ object: String, notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        guard let value = objects.removeValue(forKey: object) else { throw notFound(object) }
        revision += 1
        let nodes = registry.observedNodes(on: object)
        let olds = nodes.map { value.observedValue(at: $0.components) }
        appendPriors(for: nodes, olds: olds, object: object, reason: .sourceDeleted, into: &notifications)
        for (node, old) in zip(nodes, olds) {
            notifications.append(ChangeNotification(
                object: object, keyPath: node.keyPath, reason: .sourceDeleted, rev: revision, kind: .setting,
                isPrior: false, old: old, new: .null, recipients: node.observations.values.map(\.recipient)))
        }
        registry.removeAll(on: object)
        return revision
    }

    /// The whole object, or the value at `keyPath` (`null` for a missing key).
    public func get(_ object: String, keyPath: KeyPath?) throws(KVOError) -> JSONValue {
        guard let value = objects[object] else { throw notFound(object) }
        guard let keyPath else { return value }
        return try value.value(at: keyPath)
    }

    /// Sets the value at `keyPath` and notifies every observation whose value this changes.
    /// The revision advances even when nothing changes; then nobody is notified.
    public func set(_ object: String, keyPath: KeyPath, value newValue: JSONValue,
                    notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        guard objects[object] != nil else { throw notFound(object) }
        let nodes = registry.affectedNodes(on: object, at: keyPath.components)
        let olds = nodes.map { objects[object]!.observedValue(at: $0.components) }
        try objects[object]!.setValue(newValue, at: keyPath)
        revision += 1
        guard !nodes.isEmpty else { return revision }

        var changedNodes: [KeyPathNode] = []
        var changedOlds: [JSONValue] = []
        var changedNews: [JSONValue] = []
        let root = objects[object]!
        for (node, old) in zip(nodes, olds) {
            let new = root.observedValue(at: node.components)
            guard new != old else { continue }
            changedNodes.append(node)
            changedOlds.append(old)
            changedNews.append(new)
        }
        appendPriors(for: changedNodes, olds: changedOlds, object: object, reason: .valueChanged, into: &notifications)
        for index in changedNodes.indices {
            notifications.append(ChangeNotification(
                object: object, keyPath: changedNodes[index].keyPath, reason: .valueChanged, rev: revision,
                kind: .setting, isPrior: false, old: changedOlds[index], new: changedNews[index],
                recipients: changedNodes[index].observations.values.map(\.recipient)))
        }
        return revision
    }

    /// Sorted object ids.
    public func objectIDs() -> [String] {
        objects.keys.sorted()
    }

    // MARK: - Observations

    /// Starts observing `keyPath` of `object` for `connection`. With `.initial`, appends the
    /// initial notification (to be delivered after the reply).
    public func observe(_ object: String, keyPath: KeyPath, options: ObservationOptions, connection: ConnectionID,
                        notifications: inout [ChangeNotification]) throws(KVOError) -> SubscriptionID {
        guard let value = objects[object] else { throw notFound(object) }
        let observation = registry.add(connection: connection, object: object, keyPath: keyPath, options: options)
        if options.contains(.initial) {
            notifications.append(ChangeNotification(
                object: object, keyPath: keyPath.string, reason: .initial, rev: revision, kind: .setting,
                isPrior: false, old: .null, new: value.observedValue(at: keyPath.components),
                recipients: [observation.recipient]))
        }
        return observation.id
    }

    /// Ends observation `subscription` if `connection` owns it. Returns whether it did; removing
    /// twice, or removing another connection's observation, returns false and changes nothing.
    public func unobserve(_ subscription: SubscriptionID, connection: ConnectionID) -> Bool {
        guard let observation = registry.observation(subscription), observation.connection == connection else {
            return false
        }
        return registry.remove(subscription)
    }

    /// Ends every observation of `connection` (it disconnected). Returns how many there were.
    @discardableResult
    public func disconnect(_ connection: ConnectionID) -> Int {
        registry.removeAll(of: connection)
    }

    /// The observations of `object`, like Cocoa's observationInfo.
    public func observers(of object: String) throws(KVOError) -> [ObserverInfo] {
        guard objects[object] != nil else { throw notFound(object) }
        return registry.observations(on: object).map {
            ObserverInfo(subscription: $0.id, keyPath: $0.keyPath.string, options: $0.options, connection: $0.connection)
        }
    }

    // MARK: - Helpers

    private func notFound(_ object: String) -> KVOError {
        KVOError(.notFound, "object '\(object)' does not exist")
    }

    /// Appends, for each node, a prior notification to its observations that asked for `.prior`.
    private func appendPriors(for nodes: [KeyPathNode], olds: [JSONValue], object: String, reason: ChangeReason,
                              into notifications: inout [ChangeNotification]) {
        for (node, old) in zip(nodes, olds) {
            var recipients: [Recipient] = []
            for observation in node.observations.values where observation.options.contains(.prior) {
                recipients.append(observation.recipient)
            }
            guard !recipients.isEmpty else { continue }
            notifications.append(ChangeNotification(
                object: object, keyPath: node.keyPath, reason: reason, rev: revision, kind: .setting,
                isPrior: true, old: old, new: .null, recipients: recipients))
        }
    }
}

/// One observation as `info` reports it.
public struct ObserverInfo: Equatable, Sendable {
    public let subscription: SubscriptionID
    public let keyPath: String
    public let options: ObservationOptions
    public let connection: ConnectionID
}
