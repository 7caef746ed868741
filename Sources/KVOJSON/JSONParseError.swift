/// Why a byte sequence is not a JSON value.
public struct JSONParseError: Error, Equatable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        /// The bytes are not valid UTF-8.
        case invalidUTF8
        /// Nesting deeper than `JSONParser.maximumDepth`.
        case tooDeep
        /// An integer literal (no fraction, no exponent) outside the 64-bit range: integers are kept exact or
        /// refused, never rounded to a double (docs/protocol.md, "Numbers"). `field` is the top-level member
        /// it was found in, when the scan of a request's members knows it.
        case integerOutOfRange(literal: String, field: String?)
        /// Anything else: the message says what was expected.
        case syntax(String)
    }

    public let reason: Reason
    /// Byte offset where the problem was found.
    public let offset: Int

    public var description: String {
        switch reason {
        case .invalidUTF8: return "invalid UTF-8 at byte \(offset)"
        case .tooDeep: return "nesting deeper than \(JSONParser.maximumDepth) levels at byte \(offset)"
        case let .integerOutOfRange(literal, field):
            let prefix = field.map { "'\($0)': " } ?? ""
            return """
                \(prefix)the integer \(literal) is outside the 64-bit range (-9223372036854775808 to \
                9223372036854775807) at byte \(offset); integers are kept exact, never rounded: write a fraction \
                or an exponent (such as 1e19) to send a double
                """
        case let .syntax(message): return "\(message) at byte \(offset)"
        }
    }
}
