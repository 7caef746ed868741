import KVOJSON

/// The value a `set` request carries: its canonical text when the request wrote it so, else the decoded
/// value (issue 28, docs/design.md "Values held as text").
///
/// A value sent in canonical form (`JSONParser.MemberText.isCompact`) is not decoded by the request decoder:
/// the engine keeps it as text where nothing reads inside it, and decodes it where something does. Equality
/// is the value's (`JSONValue ==`), whatever the form. Immutable; any thread.
package enum RequestValue: Equatable, Sendable {
    case decoded(JSONValue)
    /// Exactly `JSONWriter`'s encoding of the value.
    case text(CanonicalText)

    /// The value (decoded from the text, when held as text).
    package var decoded: JSONValue {
        switch self {
        case let .decoded(value): return value
        case let .text(text): return text.value
        }
    }

    /// The canonical text, when held as text.
    package var text: CanonicalText? {
        if case let .text(text) = self { return text }
        return nil
    }

    package static func == (left: RequestValue, right: RequestValue) -> Bool {
        if let leftText = left.text, let rightText = right.text { return leftText.hasSameValue(as: rightText) }
        return left.decoded == right.decoded
    }
}
