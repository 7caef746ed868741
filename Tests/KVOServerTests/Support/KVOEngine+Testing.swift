import KVOJSON

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
