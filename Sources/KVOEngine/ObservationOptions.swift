/// What an observation asks for: Cocoa's NSKeyValueObservingOptions.
public struct ObservationOptions: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Change dictionaries carry `new`.
    public static let new = ObservationOptions(rawValue: 1 << 0)
    /// Change dictionaries carry `old`.
    public static let old = ObservationOptions(rawValue: 1 << 1)
    /// One `initial` event right after the observation starts.
    public static let initial = ObservationOptions(rawValue: 1 << 2)
    /// A prior notification before each change.
    public static let prior = ObservationOptions(rawValue: 1 << 3)
    /// Events go out in the compact encoding (docs/protocol.md, "Compact events"). Not an option a client
    /// names in `observe`: the server adds it when the connection chose `"events":"compact"` in `hello`
    /// before observing. The engine carries it to `Recipient.options` without reading it, so that
    /// `EventEncoder.variant(for:)` picks the encoding with the other options, at no cost per delivery.
    public static let compactEvents = ObservationOptions(rawValue: 1 << 4)

    /// The options an `observe` without `options` gets.
    public static let `default`: ObservationOptions = [.new]

    private static let namedOptions: [(String, ObservationOptions)] = [
        ("new", .new), ("old", .old), ("initial", .initial), ("prior", .prior),
    ]

    /// Parses one option name; nil for an unknown name.
    public init?(name: String) {
        guard let match = ObservationOptions.namedOptions.first(where: { $0.0 == name }) else { return nil }
        self = match.1
    }

    /// The option names, in canonical order (new, old, initial, prior).
    public var names: [String] {
        ObservationOptions.namedOptions.filter { contains($0.1) }.map(\.0)
    }
}
