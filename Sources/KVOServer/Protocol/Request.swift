import KVOJSON

/// A decoded, validated client request (docs/protocol.md, "Operations").
public enum Request: Equatable, Sendable {
    case hello(client: String?)
    case create(object: String, values: [String: JSONValue])
    case delete(object: String)
    case get(object: String, keyPath: KeyPath?)
    case set(object: String, keyPath: KeyPath, value: JSONValue)
    /// `insert`, `remove` and `replace` on the array at `keyPath`.
    case mutateArray(object: String, keyPath: KeyPath, mutation: CollectionMutation)
    case observe(object: String, keyPath: KeyPath, options: ObservationOptions, sinceRev: UInt64?)
    case unobserve(subscription: SubscriptionID)
    case list
    case info(object: String)
    case ping
}
