/// A validated key path: keys joined by `.`, each non-empty (`address.city`).
///
/// A value type; any thread.
public struct KeyPath: Hashable, Sendable, CustomStringConvertible {
    /// Longest key path accepted, in bytes.
    public static let maximumLength = 1024
    /// Most keys in one key path.
    public static let maximumDepth = 64

    /// The key path as the client wrote it.
    public let string: String
    /// Its keys, in order.
    public let components: [String]

    /// Parses and validates `string`.
    public init(_ string: String) throws(KVOError) {
        guard !string.isEmpty else { throw KVOError(.badRequest, "keyPath must not be empty") }
        guard string.utf8.count <= KeyPath.maximumLength else {
            throw KVOError(.badRequest, "keyPath is longer than \(KeyPath.maximumLength) bytes")
        }
        let components = string.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard !components.contains(where: \.isEmpty) else {
            throw KVOError(.badRequest, "keyPath '\(string)' has an empty key")
        }
        guard components.count <= KeyPath.maximumDepth else {
            throw KVOError(.badRequest, "keyPath has more than \(KeyPath.maximumDepth) keys")
        }
        self.string = string
        self.components = components
    }

    /// The key path of the first `count` keys, as text (for error messages).
    func prefix(_ count: Int) -> String {
        components[0..<count].joined(separator: ".")
    }

    public var description: String { string }
}
