import KVOEngine
import KVOJSON

/// A request's members as `JSONParser.scanMembers` found them in its line: checked, not yet decoded. A
/// member's value is decoded when an operation's decoder reads it, so that a request pays only for the
/// fields it uses and a `set`'s value stays (or becomes) canonical text (`heldValue(of:)`).
///
/// Looked up by a linear scan: a request has a handful of members, so this beats hashing. When a name
/// repeats, the last one counts (as it would in a dictionary built in order). Holds the line's bytes
/// unowned: lives only while the line is being decoded (`RequestDecoder.decode`), on the caller's thread.
struct RequestFields {
    let line: UnsafeBufferPointer<UInt8>
    let members: [JSONParser.MemberText]

    /// The fields the members name, as bits (`RequestField.bit`; a name no operation takes is
    /// `RequestField.unknownBit`), and those of the members whose value is `null`: one pass, a few instructions a
    /// member (the decoder checks them against the row with one AND each).
    @inline(__always)
    var presence: (fields: UInt64, nulls: UInt64) {
        var present: UInt64 = 0
        var nulls: UInt64 = 0
        for member in members {
            let bit = member.keyIndex >= 0 ? 1 << UInt64(member.keyIndex) : (RequestField.of(member)?.bit ?? RequestField.unknownBit)
            present |= bit
            if line[member.range.lowerBound] == UInt8(ascii: "n") { nulls |= bit }
        }
        return (present, nulls)
    }

    /// The (last) member called `name`, decoded.
    subscript(name: String) -> JSONValue? {
        position(of: name).map(value(at:))
    }

    /// Whether the request has a member called `name` (null or not), without decoding it.
    func contains(_ name: String) -> Bool {
        position(of: name) != nil
    }

    /// Whether the member called `name` is absent or null, without decoding it.
    func isAbsentOrNull(_ name: String) -> Bool {
        guard let position = position(of: name) else { return true }
        return line[members[position].range.lowerBound] == UInt8(ascii: "n")
    }

    /// The member called `name` as a `set` carries it: its canonical text, copied when the request wrote it so,
    /// else written from the request's text by `JSONCanonicalizer` (keys in any order, escapes, non-integral
    /// numbers: issue 44); decoded only in the rare cases the canonicalizer leaves to the tree.
    func heldValue(of name: String) -> HeldValue? {
        guard let position = position(of: name) else { return nil }
        let member = members[position]
        let text = UnsafeBufferPointer(rebasing: line[member.range])
        if member.isCompact { return .text(CanonicalText(trusting: Array(text))) }
        if let canonical = JSONCanonicalizer.canonicalText(of: text) { return .text(CanonicalText(trusting: canonical)) }
        return .decoded(value(at: position))
    }

    /// The member called `name` when it is a string written without escapes, read straight from the line
    /// (no `JSONValue` built); nil when absent, not a string or escaped (then decode it with the subscript).
    func plainString(_ name: String) -> String? {
        plainText(name).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes between the quotes of `plainString(name)`, in the line.
    func plainText(_ name: String) -> UnsafeBufferPointer<UInt8>? {
        guard let position = position(of: name) else { return nil }
        let member = members[position]
        guard member.isCompact, line[member.range.lowerBound] == UInt8(ascii: "\"") else { return nil }
        return UnsafeBufferPointer(rebasing: line[(member.range.lowerBound + 1)..<(member.range.upperBound - 1)])
    }

    private func value(at position: Int) -> JSONValue {
        let member = members[position]
        let first = line[member.range.lowerBound]
        if member.isCompact, first == UInt8(ascii: "-") || (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) {
            // A compact number is an integer in its shortest form that fits Int64 (the scan proved it): its
            // digits are read here, without a parser (most requests' `id`).
            let negative = first == UInt8(ascii: "-")
            var magnitude: UInt64 = 0
            for digit in line[(member.range.lowerBound + (negative ? 1 : 0))..<member.range.upperBound] {
                magnitude = magnitude &* 10 &+ UInt64(digit &- UInt8(ascii: "0"))
            }
            return .int(negative ? Int64(truncatingIfNeeded: 0 &- magnitude) : Int64(truncatingIfNeeded: magnitude))
        }
        do {
            return try JSONParser.parse(UnsafeBufferPointer(rebasing: line[members[position].range]))
        } catch {
            preconditionFailure("a member checked by scanMembers does not parse: \(error)")
        }
    }

    /// Where the (last) member called `name` is. Lengths are compared first: the names of a request
    /// mostly differ in length, and a short string's length costs a few instructions where `==` of two
    /// different strings calls into the standard library (about 30).
    private func position(of name: String) -> Int? {
        let length = name.utf8.count
        var index = members.endIndex
        while index > members.startIndex {
            index -= 1
            let key = members[index].key
            if key.utf8.count == length && key == name { return index }
        }
        return nil
    }
}
