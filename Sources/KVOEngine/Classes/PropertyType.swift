import KVOJSON

/// The type a class property declares (`"type"` in its spec). A value type; any thread.
enum PropertyType: String, Sendable, CaseIterable {
    /// A JSON string.
    case string
    /// Any JSON number, integral or not.
    case number
    /// A whole number: an integer, or a double with an integral value that fits in 64 bits (`3.0`).
    case integer
    /// `true` or `false`.
    case bool
    /// A JSON array.
    case array
    /// A JSON object that is not a reference.
    case object
    /// A reference to another object, `{"$ref": "<id>"}`.
    case ref

    /// Whether `value` has this type. Not called for null, which every type admits.
    func admits(_ value: JSONValue) -> Bool {
        switch (self, value) {
        case (.string, .string), (.bool, .bool), (.array, .array): return true
        case (.number, .int), (.number, .double), (.integer, .int): return true
        case let (.integer, .double(d)): return Int64(exactly: d) != nil
        case (.object, .object): return value.referencedObject == nil
        case (.ref, _): return value.referencedObject != nil
        default: return false
        }
    }

    /// The type with its article, for messages ("an integer").
    var phrase: String {
        switch self {
        case .string: return "a string"
        case .number: return "a number"
        case .integer: return "an integer"
        case .bool: return "a bool"
        case .array: return "an array"
        case .object: return "an object"
        case .ref: return #"a reference {"$ref": "<id>"}"#
        }
    }

    /// The known type names, for messages ("string, number, ...").
    static var knownNames: String { allCases.map(\.rawValue).joined(separator: ", ") }
}

extension JSONValue {
    /// What a refused value was, for messages: numbers as themselves (`3.5`), everything else by kind
    /// ("a string", "a reference").
    var validationDescription: String {
        switch self {
        case .int, .double: return description
        case .object where referencedObject != nil: return "a reference"
        default: return "\(article) \(typeName)"
        }
    }
}
