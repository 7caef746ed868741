/// Identifies a client connection to the engine. The transport assigns them; the engine only
/// records which connection owns which observation.
public struct ConnectionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (lhs: ConnectionID, rhs: ConnectionID) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { String(rawValue) }
}

/// A subscription (observation) id: unique on the server, never reused while it runs.
public typealias SubscriptionID = Int64
