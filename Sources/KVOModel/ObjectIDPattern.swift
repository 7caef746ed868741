/// The object ids one access rule applies to: an exact id, or a glob where `*` stands for any run of
/// characters (none included), e.g. `sensor-*`, `*-draft`, `user-*-profile`, `*`. No other
/// character is special, so every id that contains no `*` is its own exact pattern.
///
/// Matching is linear in the id's length for each literal piece (greedy left-to-right search of the
/// pieces between stars, which is exact for star-only globs): no backtracking, no pathological
/// input. A value; any thread.
public struct ObjectIDPattern: Hashable, Sendable, CustomStringConvertible {
    /// The pattern as written.
    public let text: String
    /// The literal pieces between stars, as UTF-8 (`a*b*c` -> [a, b, c]; `*` -> ["", ""]).
    private let pieces: [[UInt8]]

    /// Longest pattern accepted, in bytes (as the longest object id a key may name is bounded elsewhere).
    public static let maximumLength = 1024

    public enum ParseError: Error, Equatable, Sendable {
        case empty
        case tooLong(limit: Int)
    }

    public init(_ text: String) throws(ParseError) {
        guard !text.isEmpty else { throw .empty }
        guard text.utf8.count <= ObjectIDPattern.maximumLength else { throw .tooLong(limit: ObjectIDPattern.maximumLength) }
        self.text = text
        self.pieces = text.utf8.split(separator: UInt8(ascii: "*"), omittingEmptySubsequences: false).map(Array.init)
    }

    /// Whether the pattern has no star (it names exactly one id).
    public var isExact: Bool { pieces.count == 1 }

    /// The literal text before the first star (the whole id for an exact pattern).
    public var prefix: [UInt8] { pieces[0] }

    public var description: String { text }

    /// Whether `objectID` is one of the ids this pattern names.
    public func matches(_ objectID: String) -> Bool {
        var id = objectID
        return id.withUTF8 { matches(utf8: $0) }
    }

    /// Whether the UTF-8 id is one of the ids this pattern names.
    public func matches(utf8 id: UnsafeBufferPointer<UInt8>) -> Bool {
        if pieces.count == 1 { return id.elementsEqual(pieces[0]) }
        let first = pieces[0], last = pieces[pieces.count - 1]
        guard id.count >= first.count + last.count,
              id.starts(with: first),
              id[(id.count - last.count)...].elementsEqual(last)
        else { return false }
        // The middle pieces, each found at its leftmost place after the previous one.
        var position = first.count
        let end = id.count - last.count
        for piece in pieces[1..<(pieces.count - 1)] where !piece.isEmpty {
            guard let found = ObjectIDPattern.find(piece, in: id, from: position, to: end) else { return false }
            position = found + piece.count
        }
        return true
    }

    private static func find(_ needle: [UInt8], in haystack: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int) -> Int? {
        guard end - start >= needle.count else { return nil }
        var index = start
        while index + needle.count <= end {
            if haystack[index] == needle[0], haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }
}
