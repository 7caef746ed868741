import KVOJSON
import KVOModel

/// Reads a property spec (`{"type": "number", "min": 0, ...}`) into a `PropertySpec`, refusing anything
/// that does not make sense: unknown members, a constraint on a type it does not suit, a malformed
/// limit, `min` above `max`, a pattern that does not compile, `enum` values of the wrong type, a
/// default that breaks the rules. Used by `ClassDefinition.init(json:)`; any thread.
struct PropertySpecParser {
    /// The members a spec may have.
    private enum Member: String, CaseIterable {
        case type, required, `default`, min, max, minLength, maxLength, pattern, `enum`, items, `class`

        /// Whether the member may appear in an `items` spec (no required, default or nested items).
        var isAllowedInItems: Bool { self != .required && self != .default && self != .items }

        /// Whether the member suits a property of `type`.
        func suits(_ type: PropertyType) -> Bool {
            switch self {
            case .type, .required, .default, .enum: return true
            case .min, .max: return type == .number || type == .integer
            case .minLength, .maxLength: return type == .string || type == .array
            case .pattern: return type == .string
            case .items: return type == .array
            case .class: return type == .ref
            }
        }
    }

    /// Where an error is: `class 'LabColor': property 'L'`.
    let context: String

    /// Parses the spec of property `name`. Errors are `bad_request` and start with `context`.
    func property(named name: String, from json: JSONValue) throws(KVOError) -> PropertySpec {
        let members = try specMembers(json, inItems: false)
        let (type, constraints) = try typeAndConstraints(members, inItems: false)
        var items: ItemSpec?
        if let itemsJSON = members["items"] {
            let itemsParser = PropertySpecParser(context: "\(context): items")
            let itemMembers = try itemsParser.specMembers(itemsJSON, inItems: true)
            let (itemType, itemConstraints) = try itemsParser.typeAndConstraints(itemMembers, inItems: true)
            items = ItemSpec(type: itemType, constraints: itemConstraints)
        }
        var required = false
        if let requiredJSON = members["required"] {
            guard let flag = requiredJSON.boolValue else { throw error("'required' must be true or false") }
            required = flag
        }
        let spec = PropertySpec(name: name, type: type, required: required, defaultValue: members["default"],
                                constraints: constraints, items: items)
        if let defaultValue = spec.defaultValue {
            // No objects exist for a definition: a reference in a default is checked for its form and taken
            // to refer to an object of the right class (validateNewObject checks it when it fills it in).
            let referencedClass = constraints.referencedClass ?? items?.constraints.referencedClass
            do {
                try spec.validate(defaultValue, classOf: { _ in .exists(className: referencedClass) })
            } catch {
                throw self.error("'default' breaks the property's rules: \(error.message)")
            }
        }
        return spec
    }

    /// The members of a spec object, each known and allowed where it stands (top level or items).
    private func specMembers(_ json: JSONValue, inItems: Bool) throws(KVOError) -> [String: JSONValue] {
        guard let members = json.objectValue else {
            throw error("the spec must be an object (got \(json.validationDescription))")
        }
        for key in members.keys.sorted() {
            guard let member = Member(rawValue: key) else {
                let known = Member.allCases.map(\.rawValue).joined(separator: ", ")
                throw error("unknown member '\(key)' (known: \(known))")
            }
            if inItems, !member.isAllowedInItems { throw error("'\(key)' is not allowed in items") }
        }
        return members
    }

    /// The type and the constraints, each checked against the type and the others.
    private func typeAndConstraints(_ members: [String: JSONValue],
                                    inItems: Bool) throws(KVOError) -> (PropertyType, ValueConstraints) {
        guard let typeJSON = members["type"] else { throw error("'type' is missing") }
        guard let typeName = typeJSON.stringValue else { throw error("'type' must be a string") }
        guard let type = PropertyType(rawValue: typeName) else {
            throw error("unknown type '\(typeName)' (known: \(PropertyType.knownNames))")
        }
        for key in members.keys.sorted() {
            if let member = Member(rawValue: key), !member.suits(type) {
                throw error("'\(key)' is not allowed for type \(type.rawValue)")
            }
        }
        let minimum = try number(members, "min")
        let maximum = try number(members, "max")
        if let minimum, let maximum, maximum.isNumericallyLess(than: minimum) {
            throw error("'min' (\(minimum)) must not be greater than 'max' (\(maximum))")
        }
        let minLength = try length(members, "minLength")
        let maxLength = try length(members, "maxLength")
        if let minLength, let maxLength, minLength > maxLength {
            throw error("'minLength' (\(minLength)) must not be greater than 'maxLength' (\(maxLength))")
        }
        let constraints = ValueConstraints(
            referencedClass: try referencedClass(members, type: type),
            minimum: minimum, maximum: maximum, minLength: minLength, maxLength: maxLength,
            pattern: try pattern(members), allowedValues: try allowedValues(members, type: type))
        return (type, constraints)
    }

    private func number(_ members: [String: JSONValue], _ key: String) throws(KVOError) -> JSONValue? {
        guard let value = members[key] else { return nil }
        guard value.doubleValue != nil else { throw error("'\(key)' must be a number") }
        return value
    }

    private func length(_ members: [String: JSONValue], _ key: String) throws(KVOError) -> Int? {
        guard let value = members[key] else { return nil }
        guard let integer = value.intValue, integer >= 0, let length = Int(exactly: integer) else {
            throw error("'\(key)' must be a non-negative integer")
        }
        return length
    }

    private func pattern(_ members: [String: JSONValue]) throws(KVOError) -> CompiledPattern? {
        guard let value = members["pattern"] else { return nil }
        guard let source = value.stringValue else { throw error("'pattern' must be a string") }
        do {
            return try CompiledPattern(source)
        } catch {
            throw self.error("'pattern' \(error.reason)")
        }
    }

    private func allowedValues(_ members: [String: JSONValue], type: PropertyType) throws(KVOError) -> [JSONValue]? {
        guard let value = members["enum"] else { return nil }
        guard let values = value.arrayValue, !values.isEmpty else {
            throw error("'enum' must be a non-empty array")
        }
        if let wrong = values.first(where: { !type.admits($0) }) {
            throw error("'enum' value \(wrong) is not \(type.phrase)")
        }
        return values
    }

    private func referencedClass(_ members: [String: JSONValue], type: PropertyType) throws(KVOError) -> String? {
        guard let value = members["class"] else {
            if type == .ref { throw error("'class' is required for type ref") }
            return nil
        }
        guard let name = value.stringValue else { throw error("'class' must be a string") }
        if let problem = ClassDefinition.classNameProblem(name) {
            throw error("'class' \(problem)")
        }
        return name
    }

    private func error(_ what: String) -> KVOError {
        KVOError(.badRequest, "\(context): \(what)")
    }
}
