/// A value refused by a class's rules: which property, which rule, and a message for people. Nothing is
/// changed when a write fails validation. A value type; any thread.
struct ValidationFailure: Error, Equatable, Sendable {
    /// The rules a value can break (the `rule` of a failure).
    enum Rule: String, Sendable {
        case type, required, min, max, minLength, maxLength, pattern, `enum`, `class`, undefined, readOnly
    }

    /// The property (the first key of the written key path).
    let property: String
    /// The rule broken: one of `Rule`'s raw values ("type", "max", ...).
    let rule: String
    /// For people, naming the property, the rule and the limit: `'L' must be at most 100 (got 120)`.
    let message: String
}

extension ValidationFailure {
    /// A failure of `rule` (kept in an extension so that the memberwise initialiser stays).
    init(_ rule: Rule, property: String, _ message: String) {
        self.init(property: property, rule: rule.rawValue, message: message)
    }
}

/// Looks up the class of an existing object, for `ref` properties: nil when the object does not exist,
/// `.some(nil)` when it exists without a class. Supplied by the engine; called on the caller's thread.
typealias ClassOfObject = (String) -> String??
