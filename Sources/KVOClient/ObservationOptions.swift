import KVOJSON

/// What an observation asks for (docs/protocol.md, "Options"): which values the changes carry, an initial
/// change with the current value, and prior notifications. A value; any thread.
public struct ObservationOptions: OptionSet, Sendable, Hashable {
    /// The option bits.
    public let rawValue: Int
    /// Options from their bits.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Changes carry the value after the change (`new`).
    public static let new = ObservationOptions(rawValue: 1)
    /// Changes carry the value before the change (`old`).
    public static let old = ObservationOptions(rawValue: 2)
    /// One change with reason `initial` and the current value right after subscribing.
    public static let initial = ObservationOptions(rawValue: 4)
    /// A prior notification (`isPrior`) before each change.
    public static let prior = ObservationOptions(rawValue: 8)

    /// The protocol's option names, in a fixed order; without `initial` when resuming after a reconnection.
    func wireNames(resuming: Bool) -> [JSONValue] {
        var names: [JSONValue] = []
        if contains(.new) { names.append("new") }
        if contains(.old) { names.append("old") }
        if contains(.initial), !resuming { names.append("initial") }
        if contains(.prior) { names.append("prior") }
        return names
    }
}
