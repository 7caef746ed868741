import KVOJSON

extension JSONValue {
    /// The object id this value refers to when it is a to-one relationship, `{"$ref": "<id>"}`
    /// (exactly that one member, a string); nil otherwise.
    var referencedObject: String? {
        guard case let .object(members) = self, members.count == 1, case let .string(id)? = members["$ref"] else {
            return nil
        }
        return id
    }

    /// A reference to `object`.
    static func reference(to object: String) -> JSONValue {
        .object(["$ref": .string(object)])
    }
}
