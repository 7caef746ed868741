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

/// What a `ref` property's check may learn of the object a reference names, as the writer may see it.
enum ReferencedObject: Equatable {
    /// The writer may not read the object: nothing else about it (not even whether it exists) is told.
    case unreadable
    case missing
    /// It exists; its class name, nil when it has none.
    case exists(className: String?)
}

/// Looks up the object a reference names, for `ref` properties, with the writer's rights (the engine
/// checks `read` before it looks the object up). Supplied by the engine; called on the caller's thread.
typealias ClassOfObject = (String) -> ReferencedObject
