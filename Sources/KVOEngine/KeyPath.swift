import KVOModel

/// A validated key path: keys joined by `.` (`address.city`), each non-empty.
///
/// Keys walk nested objects and follow references (`{"$ref": "id"}`). On an array, a key made of
/// digits is an index (`items.2`), any other key is read from every element (`items.price`), and at
/// most one collection operator (`items.@sum.price`) aggregates the elements. A value type; any thread.
public struct KeyPath: Hashable, Sendable, CustomStringConvertible {
    /// Longest key path accepted, in bytes.
    public static let maximumLength = 1024
    /// Most keys in one key path (so that no path, whatever the references, walks without end).
    public static let maximumDepth = 64

    /// The key path as the client wrote it.
    public let string: String
    /// Its keys, in order (an operator is one key, `@sum`).
    public let components: [String]
    /// Where the collection operator stands in `components`, if there is one.
    public let operatorIndex: Int?

    /// `string`'s keys split at its dots when every byte is ASCII; nil otherwise.
    private static func asciiComponents(of string: String) -> [String]? {
        var string = string
        return string.withUTF8 { utf8 -> [String]? in
            var components: [String] = []
            components.reserveCapacity(utf8.reduce(1) { $1 == UInt8(ascii: ".") ? $0 + 1 : $0 })
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x80 else { return nil }
                if byte == UInt8(ascii: ".") {
                    components.append(String(decoding: UnsafeBufferPointer(rebasing: utf8[start..<index]), as: UTF8.self))
                    start = index + 1
                }
            }
            components.append(String(decoding: UnsafeBufferPointer(rebasing: utf8[start...]), as: UTF8.self))
            return components
        }
    }

    /// Parses and validates `string`.
    public init(_ string: String) throws(KVOError) {
        guard !string.isEmpty else { throw KVOError(.badRequest, "keyPath must not be empty") }
        guard string.utf8.count <= KeyPath.maximumLength else {
            throw KVOError(.badRequest, "keyPath is longer than \(KeyPath.maximumLength) bytes")
        }
        // Most key paths in requests are one key (`v`): then the key is the string itself, with no
        // split into substrings and no copy. (Every `set` and `observe` parses its key path.)
        // An ASCII path (`a.b.c`) is split on its dot bytes: each byte is a Character there, so this is
        // exactly the split by Character, without the grapheme breaking that costs some 5,000
        // instructions for three keys (issue 13). Other paths split by Character, as always.
        let components = !string.utf8.contains(UInt8(ascii: "."))
            ? [string]
            : KeyPath.asciiComponents(of: string)
                ?? string.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard !components.contains(where: \.isEmpty) else {
            throw KVOError(.badRequest, "keyPath '\(string)' has an empty key")
        }
        guard components.count <= KeyPath.maximumDepth else {
            throw KVOError(.badRequest, "keyPath has more than \(KeyPath.maximumDepth) keys")
        }
        var operatorIndex: Int?
        for (index, component) in components.enumerated() where component.utf8.first == UInt8(ascii: "@") && component.hasPrefix("@") {
            guard let op = CollectionOperator(rawValue: component) else {
                let known = CollectionOperator.allCases.map(\.rawValue).joined(separator: ", ")
                throw KVOError(.badRequest, "unknown collection operator '\(component)' (known: \(known))")
            }
            guard operatorIndex == nil else {
                throw KVOError(.badRequest, "keyPath '\(string)' has more than one collection operator")
            }
            guard index > 0 else {
                throw KVOError(.badRequest, "collection operator '\(component)' needs a key path to an array before it")
            }
            if op == .count, index != components.count - 1 {
                throw KVOError(.badRequest, "'@count' must be the last key of a key path")
            }
            operatorIndex = index
        }
        self.string = string
        self.components = components
        self.operatorIndex = operatorIndex
    }

    /// The operator, if the key path has one.
    public var collectionOperator: CollectionOperator? {
        operatorIndex.map { CollectionOperator(rawValue: components[$0])! }
    }

    /// The key path of the first `count` keys, as text (for error messages).
    func prefix(_ count: Int) -> String {
        components[0..<count].joined(separator: ".")
    }

    /// Refuses key paths that cannot be written (those with a collection operator).
    func requireWritable() throws(KVOError) {
        if let op = collectionOperator {
            throw KVOError(.badRequest, "'\(op.rawValue)' is read-only: a key path with a collection operator cannot be written")
        }
    }

    public var description: String { string }
}

extension String {
    /// The array index this key names (`"0"`, `"12"`; no sign, no leading zeros), if any.
    var arrayIndex: Int? {
        guard let first = utf8.first, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") else { return nil }
        guard first != UInt8(ascii: "0") || utf8.count == 1 else { return nil }
        guard utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(self)
    }
}
