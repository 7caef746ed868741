import KVOJSON

/// One stored property of a class: its type, whether it is required, its default, its constraints and,
/// for arrays, the spec of each element. Parsed by `PropertySpecParser`; owned by its
/// `ClassDefinition`; immutable, any thread.
struct PropertySpec: Sendable, Equatable {
    let name: String
    let type: PropertyType
    /// Must be present and not null.
    let required: Bool
    /// Stored when `create` leaves the property out; already checked against the rules.
    let defaultValue: JSONValue?
    let constraints: ValueConstraints
    /// For an array property, what each element must satisfy.
    let items: ItemSpec?

    /// Checks a whole value of the property: null only when not required; otherwise the type, the
    /// constraints and, for an array, each element against `items`.
    func validate(_ value: JSONValue, classOf: ClassOfObject) throws(ValidationFailure) {
        guard value != .null else {
            if required { throw ValidationFailure(.required, property: name, "'\(name)' is required") }
            return
        }
        try constraints.check(value, as: type, subject: "'\(name)'", property: name, classOf: classOf)
        if let items, case let .array(elements) = value {
            for (index, element) in elements.enumerated() {
                try items.validate(element, subject: "'\(name).\(index)'", property: name, classOf: classOf)
            }
        }
    }

    /// The canonical JSON form (`required` only when true).
    var json: JSONValue {
        var members = constraints.jsonMembers
        members["type"] = .string(type.rawValue)
        if required { members["required"] = true }
        members["default"] = defaultValue
        members["items"] = items?.json
        return .object(members)
    }
}
