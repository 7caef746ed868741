import KVOEngine
import KVOJSON
import KVOModel

/// A request's fields read as the protocol's types, with its error messages.
struct FieldReader {
    let fields: RequestFields

    func string(_ name: String) throws(KVOError) -> String {
        if let text = fields.plainString(name) { return text }
        guard let value = fields[name] else { throw KVOError(.badRequest, "missing '\(name)'") }
        guard case let .string(text) = value else { throw KVOError(.badRequest, "'\(name)' must be a string, not \(value.typeName)") }
        return text
    }

    func optionalString(_ name: String) throws(KVOError) -> String? {
        if fields.isAbsentOrNull(name) { return nil }
        return try string(name)
    }

    func optionalBool(_ name: String) throws(KVOError) -> Bool? {
        guard let value = fields[name], value != .null else { return nil }
        guard case let .bool(flag) = value else { throw KVOError(.badRequest, "'\(name)' must be true or false, not \(value.typeName)") }
        return flag
    }

    func optionalObject(_ name: String) throws(KVOError) -> [String: JSONValue]? {
        guard let value = fields[name], value != .null else { return nil }
        guard case let .object(members) = value else { throw KVOError(.badRequest, "'\(name)' must be an object, not \(value.typeName)") }
        return members
    }

    func objectID() throws(KVOError) -> String {
        let id = try string("object")
        guard !id.isEmpty else { throw KVOError(.badRequest, "'object' must not be empty") }
        guard id.utf8.count <= RequestDecoder.maximumObjectIDLength else {
            throw KVOError(.badRequest, "'object' is longer than \(RequestDecoder.maximumObjectIDLength) bytes")
        }
        return id
    }

    /// An object id pattern (`pattern` of `observe`): an exact id, or a glob where `*` is any run of
    /// characters; non-empty and at most as long as an object id.
    func pattern() throws(KVOError) -> ObjectIDPattern {
        let text = try string("pattern")
        do {
            return try ObjectIDPattern(text)
        } catch {
            switch error {
            case .empty:
                throw KVOError(.badRequest, "'pattern' must not be empty (use \"*\" for every object)")
            case let .tooLong(limit):
                throw KVOError(.badRequest, "'pattern' is longer than \(limit) bytes")
            }
        }
    }

    func keyPath() throws(KVOError) -> KeyPath {
        try KeyPath(try string("keyPath"))
    }

    func optionalKeyPath() throws(KVOError) -> KeyPath? {
        guard let text = try optionalString("keyPath") else { return nil }
        return try KeyPath(text)
    }

    enum IndexShape {
        case single(Int)
        case many([Int])

        var list: [Int] {
            switch self {
            case let .single(index): return [index]
            case let .many(indexes): return indexes
            }
        }
    }

    /// `index` (one non-negative integer) or `indexes` (an array of them); nil when neither.
    func elementIndexes() throws(KVOError) -> IndexShape? {
        let single = fields["index"].flatMap { $0 == .null ? nil : $0 }
        let many = fields["indexes"].flatMap { $0 == .null ? nil : $0 }
        switch (single, many) {
        case (nil, nil): return nil
        case (.some, .some): throw KVOError(.badRequest, "give 'index' or 'indexes', not both")
        case let (value?, nil): return .single(try index(value, name: "index"))
        case let (nil, value?):
            guard case let .array(items) = value, !items.isEmpty else {
                throw KVOError(.badRequest, "'indexes' must be a non-empty array of integers")
            }
            var list: [Int] = []
            for item in items { list.append(try index(item, name: "indexes")) }
            return .many(list)
        }
    }

    private func index(_ value: JSONValue, name: String) throws(KVOError) -> Int {
        guard case let .int(integer) = value, integer >= 0, integer <= Int64(Int32.max) else {
            throw KVOError(.badRequest, "'\(name)' must hold non-negative integers")
        }
        return Int(integer)
    }

    /// A positive integer (a count), when given.
    func optionalPositiveInteger(_ name: String) throws(KVOError) -> Int? {
        guard let value = fields[name], value != .null else { return nil }
        guard case let .int(integer) = value, integer > 0 else {
            throw KVOError(.badRequest, "'\(name)' must be a positive integer")
        }
        return Int(clamping: integer)
    }

    /// A non-negative integer revision, when given.
    func optionalRevision(_ name: String) throws(KVOError) -> UInt64? {
        guard let value = fields[name], value != .null else { return nil }
        guard case let .int(integer) = value, integer >= 0 else {
            throw KVOError(.badRequest, "'\(name)' must be a non-negative integer revision")
        }
        return UInt64(integer)
    }

    /// `ttl` (docs/protocol.md, "Expiry"): seconds, an integer or a finite number, from 0 (no expiry) to ten
    /// years, as whole milliseconds (a fraction rounded up: a positive ttl never becomes 0); nil when absent.
    func ttl() throws(KVOError) -> Int64? {
        guard let value = fields["ttl"], value != .null else { return nil }
        let maximumSeconds = KVOEngine.maximumTTL / 1000
        let milliseconds: Int64
        switch value {
        case let .int(seconds) where (0...maximumSeconds).contains(seconds):
            milliseconds = seconds * 1000
        case let .double(seconds) where seconds.isFinite && seconds >= 0 && seconds <= Double(maximumSeconds):
            milliseconds = Int64((seconds * 1000).rounded(.up))
        default:
            throw KVOError(.badRequest, "'ttl' must be a number of seconds from 0 (no expiry) to \(maximumSeconds)")
        }
        return milliseconds
    }

    /// Whether the request gave `values` (a list) rather than `value`.
    var gaveValueList: Bool { fields.contains("values") }

    /// `value` (one element) or `values` (a non-empty array of elements).
    func elementValues() throws(KVOError) -> [JSONValue] {
        switch (fields["value"], fields["values"]) {
        case (.some, .some): throw KVOError(.badRequest, "give 'value' or 'values', not both")
        case let (value?, nil): return [value]
        case let (nil, values?):
            guard case let .array(items) = values, !items.isEmpty else {
                throw KVOError(.badRequest, "'values' must be a non-empty array")
            }
            return items
        case (nil, nil): throw KVOError(.badRequest, "missing 'value' or 'values'")
        }
    }

    func options() throws(KVOError) -> ObservationOptions {
        guard let value = fields["options"], value != .null else { return .default }
        guard case let .array(names) = value else { throw KVOError(.badRequest, "'options' must be an array of option names") }
        var options: ObservationOptions = []
        for name in names {
            guard case let .string(text) = name else { throw KVOError(.badRequest, "'options' must be an array of option names") }
            guard let option = ObservationOptions(name: text) else {
                throw KVOError(.badRequest, "unknown option '\(text)' (expected new, old, initial or prior)")
            }
            options.insert(option)
        }
        return options
    }
}
