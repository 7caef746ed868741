import KVOJSON

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Shorthands for engine tests: key paths as text, and each write returning the notifications it
/// caused. Tests only; `try!` on key paths because every test key path is valid by construction.
extension KVOEngine {
    static let testConnection = ConnectionID(1)

    @discardableResult
    func create(_ object: String, _ values: [String: JSONValue]) throws -> [ChangeNotification] {
        var notifications: [ChangeNotification] = []
        _ = try create(object, values: values, notifications: &notifications)
        return notifications
    }

    /// `create` for tests that do not look at its notifications.
    func create(_ object: String, values: [String: JSONValue]) throws(KVOError) -> UInt64 {
        var ignored: [ChangeNotification] = []
        return try create(object, values: values, notifications: &ignored)
    }

    @discardableResult
    func set(_ object: String, _ keyPath: String, _ value: JSONValue) throws -> [ChangeNotification] {
        var notifications: [ChangeNotification] = []
        _ = try set(object, keyPath: try! KeyPath(keyPath), value: value, notifications: &notifications)
        return notifications
    }

    @discardableResult
    func delete(_ object: String) throws -> [ChangeNotification] {
        var notifications: [ChangeNotification] = []
        _ = try delete(object, notifications: &notifications)
        return notifications
    }

    @discardableResult
    func mutate(_ object: String, _ keyPath: String, _ mutation: CollectionMutation) throws -> [ChangeNotification] {
        var notifications: [ChangeNotification] = []
        _ = try mutateArray(object, keyPath: try! KeyPath(keyPath), mutation, notifications: &notifications)
        return notifications
    }

    @discardableResult
    func observe(_ object: String, _ keyPath: String, _ options: ObservationOptions = [.new, .old],
                 by connection: ConnectionID = KVOEngine.testConnection) throws -> SubscriptionID {
        var ignored: [ChangeNotification] = []
        return try observe(object, keyPath: try! KeyPath(keyPath), options: options, connection: connection,
                           notifications: &ignored)
    }

    func value(_ object: String, _ keyPath: String) throws -> JSONValue {
        try get(object, keyPath: try! KeyPath(keyPath))
    }
}

/// Shorthands for classes and bindings in engine tests.
extension KVOEngine {
    /// Defines a class from JSON text.
    @discardableResult
    func defineClass(json text: String) throws -> String {
        try defineClass(try JSONParser.parse(text))
    }

    /// Creates an object of `className`.
    @discardableResult
    func create(_ object: String, of className: String, _ values: [String: JSONValue] = [:]) throws -> [ChangeNotification] {
        var notifications: [ChangeNotification] = []
        _ = try create(object, values: values, className: className, notifications: &notifications)
        return notifications
    }

    /// `bind` from `object:keyPath` endpoints; returns the id and the notifications (from `now`).
    func bind(_ source: String, to target: String, filter: String? = nil, convert: String? = nil, now: Bool = false,
              by creator: ConnectionID = KVOEngine.testConnection) throws -> (UInt64, [ChangeNotification]) {
        try bind(BindingSpec(kind: .bind, sources: [endpoint(source)], target: endpoint(target), filter: filter,
                             transform: convert), now: now, creator: creator)
    }

    /// `combineLatest` from `object:keyPath` endpoints.
    func combineLatest(_ sources: [String], to target: String, reduce: String, filter: String? = nil, now: Bool = false,
                       by creator: ConnectionID = KVOEngine.testConnection) throws -> (UInt64, [ChangeNotification]) {
        try bind(BindingSpec(kind: .combineLatest, sources: sources.map(endpoint), target: endpoint(target),
                             filter: filter, transform: reduce), now: now, creator: creator)
    }

    private func bind(_ spec: BindingSpec, now: Bool, creator: ConnectionID) throws -> (UInt64, [ChangeNotification]) {
        var notifications: [ChangeNotification] = []
        let id = try bind(spec, now: now, creator: creator, notifications: &notifications)
        return (id, notifications)
    }

    private func endpoint(_ text: String) -> BindingEndpoint {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        return BindingEndpoint(object: parts[0], keyPath: try! KeyPath(parts[1]))
    }
}
