/// Names a Swift key path over a `Decodable` model (`\TodoList.owner.city`) as kvod's dotted key path
/// (`"owner.city"`), from the model's own coding keys, so that a renamed `CodingKeys` case is followed and a
/// typo does not compile. Thread-safe (a locked cache of the names found); any thread.
///
/// How: the model is decoded once from a decoder that hands every leaf a value of its own (a marked string,
/// a distinct number) and records the coding path it handed it at. The key path is then applied to that
/// instance and the leaves found in the result (walked with `Mirror`) say where it points: a leaf's coding
/// path less the levels it sits below the result. Leaves that cannot carry a tag (`Bool`, and enums decoded
/// from a raw value, which get their first case when `CaseIterable`) are told apart by decoding once more per
/// such leaf with only that one changed (`true`, the second case) and looking for the difference.
///
/// Works for models whose `Codable` follows their stored properties (what the compiler synthesises, with or
/// without custom `CodingKeys`). Throws `KVODError.coding` for what cannot be named this way (a value with no
/// leaves, such as an empty dictionary; a model that refuses the placeholders; keys containing `.`): use the
/// string form then.
enum KeyPathNaming {
    private static let cache = Locked<[AnyKeyPath: String]>([:])

    /// kvod's key path for `keyPath` (cached per key path).
    static func name<Root: Decodable, Value>(of keyPath: KeyPath<Root, Value>) throws(KVODError) -> String {
        if let known = cache.withLock({ $0[keyPath] }) { return known }
        let name = try derive(keyPath)
        cache.withLock { $0[keyPath] = name }
        return name
    }

    private static func derive<Root: Decodable, Value>(_ keyPath: KeyPath<Root, Value>) throws(KVODError) -> String {
        func failure(_ reason: String) -> KVODError {
            .coding("cannot name \(keyPath) from \(Root.self)'s coding keys: \(reason); use the string key path form")
        }
        func decodeRoot(flipping flipped: Int?) throws(KVODError) -> (Root, LeafTags) {
            let tags = LeafTags(flipped: flipped)
            do {
                return (try Root(from: TaggingDecoder(tags: tags, codingPath: [])), tags)
            } catch {
                throw failure("decoding it with placeholders failed (\(error))")
            }
        }
        let (root, tags) = try decodeRoot(flipping: nil)
        if let problem = tags.problem { throw failure(problem) }
        var names = Set<[String]>()
        let value = root[keyPath: keyPath]
        collect(value, depth: 0, tags: tags, into: &names)
        if names.isEmpty {
            // Only untagged leaves (or none): decode once per such leaf with that one changed, and look for it.
            for index in 0..<tags.variantPaths.count {
                let (variant, variantTags) = try decodeRoot(flipping: index)
                collectDifferences(value, variant[keyPath: keyPath], depth: 0, path: variantTags.variantPaths[index],
                                   into: &names)
            }
        }
        guard names.count == 1, let components = names.first else {
            throw failure(names.isEmpty ? "no value of the model was found at it"
                                        : "it points at several places (\(names.map { $0.joined(separator: ".") }.sorted()))")
        }
        if components.contains(where: { $0.isEmpty || $0.contains(".") }) {
            throw failure("a coding key is empty or contains \".\"")
        }
        return components.joined(separator: ".")
    }

    /// Adds the name each tagged leaf inside `value` implies: its coding path less `depth` levels.
    private static func collect(_ value: Any, depth: Int, tags: LeafTags, into names: inout Set<[String]>) {
        guard depth <= 64 else { return }
        if let path = tags.path(ofLeaf: value) {
            if path.count >= depth { names.insert(Array(path.dropLast(depth))) }
            return
        }
        let mirror = Mirror(reflecting: value)
        let childDepth = mirror.displayStyle == .optional ? depth : depth + 1
        for child in mirror.children { collect(child.value, depth: childDepth, tags: tags, into: &names) }
    }

    /// Adds the name implied where `base` and `changed` (the same key path's value with one untagged leaf
    /// changed, the one at `path`) differ: `path` less the levels the differing leaf sits below the value.
    private static func collectDifferences(_ base: Any, _ changed: Any, depth: Int, path: [String],
                                           into names: inout Set<[String]>) {
        guard depth <= 64 else { return }
        let baseMirror = Mirror(reflecting: base)
        let changedMirror = Mirror(reflecting: changed)
        if baseMirror.children.isEmpty || changedMirror.children.isEmpty {
            if String(reflecting: base) != String(reflecting: changed), path.count >= depth {
                names.insert(Array(path.dropLast(depth)))
            }
            return
        }
        let childDepth = baseMirror.displayStyle == .optional ? depth : depth + 1
        for (baseChild, changedChild) in zip(baseMirror.children, changedMirror.children) {
            collectDifferences(baseChild.value, changedChild.value, depth: childDepth, path: path, into: &names)
        }
    }
}

/// The leaves one tagging decoding handed out, and where. One decoding, one thread.
private final class LeafTags {
    /// Strings are this marker and the leaf's number.
    static let marker = "\u{F8FF}kvod-leaf-"
    /// Numbers are this plus the leaf's number (plus 0.5 for floating point; the number alone for integer types
    /// too narrow for it), so that a property the model does not decode, left at a small default, is not taken
    /// for a leaf.
    static let numberBase = 1_000_000
    /// The untagged leaf given its other value in this decoding (nil: none).
    let flipped: Int?
    private(set) var paths: [[String]] = []
    /// Where the untagged leaves (`Bool`s, enums given a case) are, in decoding order.
    private(set) var variantPaths: [[String]] = []
    /// Why the decoding could not tag every leaf apart (a narrow integer type out of distinct values).
    var problem: String?

    init(flipped: Int?) { self.flipped = flipped }

    /// A new leaf at `codingPath`; returns its number.
    func add(_ codingPath: [any CodingKey]) -> Int {
        paths.append(codingPath.map(\.stringValue))
        return paths.count
    }

    /// A new untagged leaf at `codingPath`: whether it gets its other value in this decoding.
    func addVariant(_ codingPath: [any CodingKey]) -> Bool {
        variantPaths.append(codingPath.map(\.stringValue))
        return variantPaths.count - 1 == flipped
    }

    /// The coding path of a tagged leaf value; nil for anything else.
    func path(ofLeaf value: Any) -> [String]? {
        let number: Int?
        switch value {
        case let text as String:
            guard text.hasPrefix(Self.marker) else { return nil }
            number = Int(text.dropFirst(Self.marker.count))
        case let double as Double: number = Int(exactly: double - 0.5).map { $0 - Self.numberBase }
        case let float as Float: number = Int(exactly: Double(float) - 0.5).map { $0 - Self.numberBase }
        case let integer as any BinaryInteger:
            // Types of 32 bits or more carry the base; narrower ones (which cannot) the number alone.
            number = Int(exactly: integer).map { integer.bitWidth >= 32 ? $0 - Self.numberBase : $0 }
        default: return nil
        }
        guard let number, number >= 1, number <= paths.count else { return nil }
        return paths[number - 1]
    }
}

/// A decoder that gives every leaf a value of its own and records its coding path (`LeafTags`). Optionals are
/// present, arrays have one element, keyed containers have no `allKeys` (dictionaries are empty).
private struct TaggingDecoder: Decoder {
    let tags: LeafTags
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(TaggingKeyedContainer<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        TaggingUnkeyedContainer(decoder: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        TaggingValue(decoder: self)
    }

    func nested(_ key: any CodingKey) throws -> TaggingDecoder {
        guard codingPath.count < 32 else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "nested too deeply"))
        }
        return TaggingDecoder(tags: tags, codingPath: codingPath + [key])
    }

    /// Decodes `T` here; an enum refusing its placeholder raw value is given its first case when `CaseIterable`
    /// (its second when it is the leaf `LeafTags.flipped` names).
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        do {
            return try T(from: self)
        } catch {
            if let iterable = T.self as? any CaseIterable.Type {
                let cases = Self.cases(of: iterable)
                let index = tags.addVariant(codingPath) && cases.count > 1 ? 1 : 0
                if index < cases.count, let value = cases[index] as? T { return value }
            }
            throw error
        }
    }

    private static func cases<C: CaseIterable>(of type: C.Type) -> [Any] { C.allCases.prefix(2).map { $0 } }
}

private struct TaggingKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: TaggingDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] { [] }

    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoder.nested(key).decodeValue(type)
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        try decoder.nested(key).decodeValue(type)
    }
    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try decoder.nested(key).container(keyedBy: type)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try decoder.nested(key).unkeyedContainer()
    }
    func superDecoder() throws -> any Decoder { decoder }
    func superDecoder(forKey key: Key) throws -> any Decoder { try decoder.nested(key) }
}

/// One element, then the end.
private struct TaggingUnkeyedContainer: UnkeyedDecodingContainer {
    let decoder: TaggingDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { 1 }
    var currentIndex = 0
    var isAtEnd: Bool { currentIndex >= 1 }

    private struct Index: CodingKey {
        let intValue: Int?
        var stringValue: String { String(intValue ?? 0) }
        init(_ index: Int) { intValue = index }
        init?(stringValue: String) { return nil }
        init?(intValue: Int) { self.intValue = intValue }
    }

    private mutating func next() throws -> TaggingDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "one element only"))
        }
        defer { currentIndex += 1 }
        return try decoder.nested(Index(currentIndex))
    }

    mutating func decodeNil() throws -> Bool { false }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decodeValue(type) }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
    mutating func superDecoder() throws -> any Decoder { try next() }
}

/// A leaf: a marked string, a distinct number (n + 0.5 for floating point), a `Bool` as `LeafTags` says.
private struct TaggingValue: SingleValueDecodingContainer {
    let decoder: TaggingDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    private func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        let number = decoder.tags.add(codingPath)
        guard let value = T(exactly: LeafTags.numberBase + number) ?? T(exactly: number) else {
            decoder.tags.problem = "more leaves than \(T.self) has distinct values"
            return 0
        }
        return value
    }

    func decodeNil() -> Bool { false }
    func decode(_ type: Bool.Type) throws -> Bool { decoder.tags.addVariant(codingPath) }
    func decode(_ type: String.Type) throws -> String { LeafTags.marker + String(decoder.tags.add(codingPath)) }
    func decode(_ type: Double.Type) throws -> Double { Double(LeafTags.numberBase + decoder.tags.add(codingPath)) + 0.5 }
    func decode(_ type: Float.Type) throws -> Float { Float(LeafTags.numberBase + decoder.tags.add(codingPath)) + 0.5 }
    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decodeValue(type) }
}
