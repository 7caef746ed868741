/// Identifies a client connection to the engine. The transport assigns them; the engine only
/// records which connection owns which observation.
///
/// `rawValue` is the connection's number (unique while the server runs, shown to clients); `slot`
/// is a hint the server uses to find the connection by array index instead of hashing. Equality
/// and hashing use `rawValue` only.
public struct ConnectionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public let slot: UInt32

    public init(_ rawValue: UInt64, slot: UInt32 = 0) {
        self.rawValue = rawValue
        self.slot = slot
    }

    public static func == (lhs: ConnectionID, rhs: ConnectionID) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
    public static func < (lhs: ConnectionID, rhs: ConnectionID) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { String(rawValue) }
}

/// A subscription (observation) id: unique on the server, never reused while it runs.
public typealias SubscriptionID = Int64

/// Object ids: strings of at most `maximumLength` UTF-8 bytes (requests and binding definitions check it).
package enum ObjectID {
    package static let maximumLength = 1024
}
