import KVOJSON

/// Validation of writes to objects of a class. The engine calls these on the loop thread before it
/// changes anything; a `ValidationFailure` means the write is refused (`invalid_value`) and nothing
/// changes. They read only the immutable definition and call `classOf` for references.
extension ClassDefinition {
    /// For `create`: checks every given value, refuses undefined properties (rule "undefined") and values
    /// for computed ones (rule "readOnly"), fills in defaults for absent properties, then checks
    /// `required`. Returns the values to store. Failures come in that order, properties by name.
    func validateNewObject(_ values: [String: JSONValue], classOf: ClassOfObject) throws(ValidationFailure)
        -> [String: JSONValue]
    {
        var given: [PropertySpec] = []
        for name in values.keys.sorted() { given.append(try storedProperty(name)) }
        for spec in given {
            if let value = values[spec.name], value != .null { try spec.validate(value, classOf: classOf) }
        }
        let all = properties.values.sorted { $0.name < $1.name }
        let absent = all.filter { values[$0.name] == nil }
        var result = values
        for spec in absent { result[spec.name] = spec.defaultValue }
        for spec in all where spec.required && (result[spec.name] ?? .null) == .null {
            throw ValidationFailure(.required, property: spec.name, "'\(spec.name)' is required")
        }
        // A reference in a default could only be checked for its form when the class was defined.
        for spec in absent {
            if let value = spec.defaultValue { try spec.validate(value, classOf: classOf) }
        }
        return result
    }

    /// For `set` of a whole property (the key path's first key is `property` and it is the only key).
    /// Computed → "readOnly"; undefined → "undefined"; null on a required property → "required"; then
    /// the property's rules, and `items` for each element of an array.
    func validate(property: String, value: JSONValue, classOf: ClassOfObject) throws(ValidationFailure) {
        try storedProperty(property).validate(value, classOf: classOf)
    }

    /// For a write inside a property value (a longer key path, `meta.color` or `tags.2`): computed →
    /// "readOnly", undefined → "undefined"; for an array property and a write of one element (`tags.2`),
    /// the element is checked against `items`; otherwise nothing to check (object properties have no
    /// inner schema). `innerPath` is the key path after the property (non-empty).
    func validateInnerWrite(property: String, innerPath: [String], value: JSONValue,
                            classOf: ClassOfObject) throws(ValidationFailure) {
        let spec = try storedProperty(property)
        guard let items = spec.items, innerPath.count == 1, let index = innerPath[0].arrayIndex else { return }
        try items.validate(value, subject: "'\(property).\(index)'", property: property, classOf: classOf)
    }

    /// For insert/replace/remove on an array property: each new element against `items`, and the
    /// resulting element count against minLength/maxLength. `property` is the array property (only
    /// top-level array properties are validated). A property of another type → "type".
    func validateArrayChange(property: String, newElements: [JSONValue], resultingCount: Int,
                             classOf: ClassOfObject) throws(ValidationFailure) {
        let spec = try storedProperty(property)
        guard spec.type == .array else {
            throw ValidationFailure(.type, property: property,
                                    "'\(property)' is \(spec.type.phrase), not an array")
        }
        if let items = spec.items {
            for element in newElements {
                try items.validate(element, subject: "an element of '\(property)'", property: property,
                                   classOf: classOf)
            }
        }
        let constraints = spec.constraints
        if let minLength = constraints.minLength, resultingCount < minLength {
            throw ValidationFailure(.minLength, property: property,
                                    "'\(property)' must have at least \(minLength) element\(minLength == 1 ? "" : "s") (got \(resultingCount))")
        }
        if let maxLength = constraints.maxLength, resultingCount > maxLength {
            throw ValidationFailure(.maxLength, property: property,
                                    "'\(property)' must have at most \(maxLength) element\(maxLength == 1 ? "" : "s") (got \(resultingCount))")
        }
    }

    /// The stored property a write names: "readOnly" for a computed one, "undefined" for an unknown one.
    private func storedProperty(_ name: String) throws(ValidationFailure) -> PropertySpec {
        if let spec = properties[name] { return spec }
        if computed[name] != nil {
            throw ValidationFailure(.readOnly, property: name, "'\(name)' is a computed property and read-only")
        }
        throw ValidationFailure(.undefined, property: name, "class \(self.name) has no property '\(name)'")
    }
}
