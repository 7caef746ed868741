import KVOJSON

/// The constraints of one property spec (or of its `items`), apart from the type: what a value must
/// satisfy beyond having the right type. Built by `PropertySpecParser`, which has already checked that
/// each constraint suits the type. Immutable; any thread.
struct ValueConstraints: Sendable, Equatable {
    /// For `ref`: the class the referenced object must have.
    let referencedClass: String?
    /// `min`: the least allowed number, inclusive (number and integer types), as written (int or double).
    let minimum: JSONValue?
    /// `max`: the greatest allowed number, inclusive.
    let maximum: JSONValue?
    /// The least length, inclusive: Characters of a string, elements of an array.
    let minLength: Int?
    /// The greatest length, inclusive.
    let maxLength: Int?
    /// A regular expression a string must match somewhere.
    let pattern: CompiledPattern?
    /// The values allowed (`enum`), compared as JSON values are (`1` equals `1.0`).
    let allowedValues: [JSONValue]?

    /// The constraints' members in the canonical JSON form of a spec.
    var jsonMembers: [String: JSONValue] {
        var members: [String: JSONValue] = [:]
        members["class"] = referencedClass.map(JSONValue.string)
        members["min"] = minimum
        members["max"] = maximum
        members["minLength"] = minLength.map { .int(Int64($0)) }
        members["maxLength"] = maxLength.map { .int(Int64($0)) }
        members["pattern"] = pattern.map { .string($0.source) }
        members["enum"] = allowedValues.map(JSONValue.array)
        return members
    }

    /// Checks a non-null `value` against `type` and these constraints, in the order type, min, max,
    /// minLength, maxLength, pattern, enum, class. `subject` names the value in messages (`'L'`,
    /// `'tags.2'`, `an element of 'tags'`); `property` goes into the failure; `classOf` tells the class of a
    /// referenced object.
    func check(_ value: JSONValue, as type: PropertyType, subject: String, property: String,
               classOf: ClassOfObject) throws(ValidationFailure) {
        guard type.admits(value) else {
            throw ValidationFailure(.type, property: property,
                                    "\(subject) must be \(type.phrase) (got \(value.validationDescription))")
        }
        if let minimum, value.isNumericallyLess(than: minimum) {
            throw ValidationFailure(.min, property: property, "\(subject) must be at least \(minimum) (got \(value))")
        }
        if let maximum, maximum.isNumericallyLess(than: value) {
            throw ValidationFailure(.max, property: property, "\(subject) must be at most \(maximum) (got \(value))")
        }
        try checkLength(of: value, subject: subject, property: property)
        if let pattern, case let .string(string) = value {
            try checkPattern(pattern, string, subject: subject, property: property)
        }
        if let allowedValues, !allowedValues.contains(value) {
            let listed = allowedValues.map(\.description).joined(separator: ", ")
            throw ValidationFailure(.enum, property: property, "\(subject) must be one of \(listed)")
        }
        if let referencedClass, let id = value.referencedObject {
            try checkClass(of: id, is: referencedClass, subject: subject, property: property, classOf: classOf)
        }
    }

    /// Refuses `string` when it does not match `pattern`, or when the match ran out of its work limit
    /// (a pattern that backtracks catastrophically on this string). The value and the pattern are echoed
    /// escaped and cut.
    private func checkPattern(_ pattern: CompiledPattern, _ string: String, subject: String,
                              property: String) throws(ValidationFailure) {
        let match = pattern.matches(string)
        guard match != .matched else { return }
        let shownPattern = PrintableText.escaped(pattern.source, limit: CompiledPattern.maximumLength)
        let shownValue = "\"" + PrintableText.escaped(string) + "\""
        if match == .exceededWorkLimit {
            throw ValidationFailure(.pattern, property: property,
                                    "\(subject) could not be checked against the pattern \(shownPattern): the match exceeded its work limit (got \(shownValue))")
        }
        throw ValidationFailure(.pattern, property: property,
                                "\(subject) must match the pattern \(shownPattern) (got \(shownValue))")
    }

    private func checkLength(of value: JSONValue, subject: String, property: String) throws(ValidationFailure) {
        guard minLength != nil || maxLength != nil else { return }
        let length: Int
        let unit: String
        switch value {
        case let .string(string): (length, unit) = (string.count, "character")
        case let .array(elements): (length, unit) = (elements.count, "element")
        default: return
        }
        func phrase(_ bound: String, _ limit: Int) -> String {
            let counted = "\(limit) \(unit)\(limit == 1 ? "" : "s")"
            return unit == "character" ? "be \(bound) \(counted) long" : "have \(bound) \(counted)"
        }
        if let minLength, length < minLength {
            throw ValidationFailure(.minLength, property: property,
                                    "\(subject) must \(phrase("at least", minLength)) (got \(length))")
        }
        if let maxLength, length > maxLength {
            throw ValidationFailure(.maxLength, property: property,
                                    "\(subject) must \(phrase("at most", maxLength)) (got \(length))")
        }
    }

    private func checkClass(of id: String, is referencedClass: String, subject: String, property: String,
                            classOf: ClassOfObject) throws(ValidationFailure) {
        let found: String?
        switch classOf(id) {
        case .unreadable:
            // One refusal whatever the object is (or whether it is): its existence and class are not told.
            throw ValidationFailure(.class, property: property,
                                    "\(subject) must refer to an object of class \(referencedClass) that you may read ('\(id)' is not one you may read)")
        case .missing:
            throw ValidationFailure(.class, property: property,
                                    "\(subject) refers to '\(id)', which does not exist")
        case let .exists(className):
            found = className
        }
        guard found == referencedClass else {
            let has = found.map { "has class \($0)" } ?? "has no class"
            throw ValidationFailure(.class, property: property,
                                    "\(subject) must refer to an object of class \(referencedClass) ('\(id)' \(has))")
        }
    }
}
