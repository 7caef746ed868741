/// What an observation asks for: Cocoa's NSKeyValueObservingOptions.
package struct ObservationOptions: OptionSet, Hashable, Sendable {
    package let rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Change dictionaries carry `new`.
    package static let new = ObservationOptions(rawValue: 1 << 0)
    /// Change dictionaries carry `old`.
    package static let old = ObservationOptions(rawValue: 1 << 1)
    /// One `initial` event right after the observation starts.
    package static let initial = ObservationOptions(rawValue: 1 << 2)
    /// A prior notification before each change.
    package static let prior = ObservationOptions(rawValue: 1 << 3)
    /// Events go out in the compact encoding (docs/protocol.md, "Compact events"). Not an option a client
    /// names in `observe`: the server adds it when the connection chose `"events":"compact"` in `hello`
    /// before observing. The engine carries it to `Recipient.options` without reading it, so that
    /// `EventEncoder.variant(for:)` picks the encoding with the other options, at no cost per delivery.
    package static let compactEvents = ObservationOptions(rawValue: 1 << 4)

    /// The options an `observe` without `options` gets.
    package static let `default`: ObservationOptions = [.new]

    private static let namedOptions: [(String, ObservationOptions)] = [
        ("new", .new), ("old", .old), ("initial", .initial), ("prior", .prior),
    ]

    /// Parses one option name; nil for an unknown name.
    package init?(name: String) {
        guard let match = ObservationOptions.namedOptions.first(where: { $0.0 == name }) else { return nil }
        self = match.1
    }

    /// The option names, in canonical order (new, old, initial, prior).
    package var names: [String] {
        ObservationOptions.namedOptions.filter { contains($0.1) }.map(\.0)
    }
}
