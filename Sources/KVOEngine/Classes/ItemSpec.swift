import KVOJSON

/// The `items` of an array property: the type and constraints each element must satisfy. Has no
/// `required`, `default` or `items` of its own. Owned by its `PropertySpec`; immutable, any thread.
struct ItemSpec: Sendable, Equatable {
    let type: PropertyType
    let constraints: ValueConstraints

    /// Checks one element; null passes. `subject` names the element in messages.
    func validate(_ element: JSONValue, subject: String, property: String,
                  classOf: ClassOfObject) throws(ValidationFailure) {
        guard element != .null else { return }
        try constraints.check(element, as: type, subject: subject, property: property, classOf: classOf)
    }

    /// The canonical JSON form.
    var json: JSONValue {
        var members = constraints.jsonMembers
        members["type"] = .string(type.rawValue)
        return .object(members)
    }
}
