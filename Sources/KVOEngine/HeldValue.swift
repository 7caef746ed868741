import KVOJSON

/// A value where a `set` may have left it as canonical text (`CanonicalText`) instead of decoded: a live
/// object's member, a watched path's last reading, a notification's old and new value. `value` decodes text
/// on each call; the write path itself only compares (`hasSameValue`), measures and forwards the text.
/// A `set` request carries its value as one too (`Request.set`): as text when the request wrote it in
/// canonical form, so that the decoder need not build it. Equality is the value's (`hasSameValue`).
/// A value type; any thread.
package enum HeldValue: Sendable, Equatable {
    case decoded(JSONValue)
    case text(CanonicalText)

    /// The value (decoded anew from text).
    package var value: JSONValue {
        switch self {
        case let .decoded(value): return value
        case let .text(text): return text.value
        }
    }

    /// The text, when the value is held as text.
    package var text: CanonicalText? {
        if case let .text(text) = self { return text }
        return nil
    }

    /// `JSONValue ==` of the two values: texts compare as `CanonicalText.hasSameValue`, a text and a
    /// decoded value by decoding the text.
    package func hasSameValue(as other: HeldValue) -> Bool {
        switch (self, other) {
        case let (.decoded(left), .decoded(right)): return left == right
        case let (.text(left), .text(right)): return left.hasSameValue(as: right)
        case let (.text(text), .decoded(value)), let (.decoded(value), .text(text)): return text.hasSameValue(as: value)
        }
    }

    package static func == (left: HeldValue, right: HeldValue) -> Bool {
        left.hasSameValue(as: right)
    }

    /// The value as canonical text: the text it is held as, or the decoded value encoded (`JSONWriter`).
    package var canonicalText: CanonicalText {
        switch self {
        case let .decoded(value): return CanonicalText(trusting: JSONWriter.bytes(value))
        case let .text(text): return text
        }
    }

    /// Bytes of the value as compact JSON.
    package var encodedLength: Int {
        switch self {
        case let .decoded(value): return JSONWriter.encodedLength(of: value)
        case let .text(text): return text.count
        }
    }

    /// Appends the value's compact JSON (`JSONWriter.write`) to `buffer`.
    package func write(into buffer: inout [UInt8]) {
        switch self {
        case let .decoded(value): JSONWriter.write(value, into: &buffer)
        case let .text(text): buffer.append(contentsOf: text.bytes)
        }
    }
}
