/// `Codable` for `JSONValue`, so that a JSON value can be a field of a user's `Codable` type (and
/// `KVOClient` can hand values out undecoded): each case encodes as the JSON it is.
extension JSONValue: Codable {
    /// Decodes whatever JSON the decoder holds: null, a bool, an integer, a number, a string, an array or an object.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Int64.self) {
            self = .int(number)
        } else if let number = try? container.decode(Double.self) {
            self = .double(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let elements = try? container.decode([JSONValue].self) {
            self = .array(elements)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Encodes the JSON this value is.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case let .bool(flag): try container.encode(flag)
        case let .int(number): try container.encode(number)
        case let .double(number): try container.encode(number)
        case let .string(text): try container.encode(text)
        case let .array(elements): try container.encode(elements)
        case let .object(members): try container.encode(members)
        }
    }
}
