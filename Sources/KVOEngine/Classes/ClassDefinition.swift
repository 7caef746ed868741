import KVOJSON
import KVOModel

/// A validated class definition (`defineClass`): a name, typed stored properties with their
/// constraints and defaults, and computed properties. Objects created with the class are validated
/// against it (`ClassDefinition+Validation.swift`). Immutable; any thread.
struct ClassDefinition: Sendable, Equatable {
    /// Longest class, property or computed property name, in bytes.
    static let maximumNameLength = 128
    /// Most stored and computed properties together in one class.
    static let maximumPropertyCount = 256

    let name: String
    /// Stored properties by name.
    let properties: [String: PropertySpec]
    /// Computed properties by name.
    let computed: [String: ComputedPropertySpec]

    /// Parses and checks a definition (the `class` member of the request): `{"name": ..., "properties":
    /// {...}, "computed": {...}}`. Errors are `bad_request` naming the class, the property and what is
    /// wrong.
    init(json: JSONValue) throws(KVOError) {
        guard let members = json.objectValue else { throw KVOError(.badRequest, "class must be an object") }
        guard let nameJSON = members["name"] else { throw KVOError(.badRequest, "class: 'name' is missing") }
        guard let name = nameJSON.stringValue else { throw KVOError(.badRequest, "class: 'name' must be a string") }
        if let problem = ClassDefinition.classNameProblem(name) {
            throw KVOError(.badRequest, "class name '\(name)' \(problem)")
        }
        let context = "class '\(name)'"
        func error(_ what: String) -> KVOError { KVOError(.badRequest, "\(context): \(what)") }
        if let unknown = members.keys.sorted().first(where: { !["name", "properties", "computed"].contains($0) }) {
            throw error("unknown member '\(unknown)' (known: name, properties, computed)")
        }
        let propertiesJSON = try ClassDefinition.objectMember(members, "properties", context: context)
        let computedJSON = try ClassDefinition.objectMember(members, "computed", context: context)
        let count = propertiesJSON.count + computedJSON.count
        guard count <= ClassDefinition.maximumPropertyCount else {
            throw error("\(count) properties and computed properties; at most \(ClassDefinition.maximumPropertyCount)")
        }

        var properties: [String: PropertySpec] = [:]
        for (propertyName, specJSON) in propertiesJSON.sorted(by: { $0.key < $1.key }) {
            let propertyContext = "\(context): property '\(propertyName)'"
            if let problem = ClassDefinition.keyNameProblem(propertyName) {
                throw KVOError(.badRequest, "\(propertyContext): the name \(problem)")
            }
            let parser = PropertySpecParser(context: propertyContext)
            properties[propertyName] = try parser.property(named: propertyName, from: specJSON)
        }
        var computed: [String: ComputedPropertySpec] = [:]
        for (computedName, entryJSON) in computedJSON.sorted(by: { $0.key < $1.key }) {
            let computedContext = "\(context): computed property '\(computedName)'"
            if let problem = ClassDefinition.keyNameProblem(computedName) {
                throw KVOError(.badRequest, "\(computedContext): the name \(problem)")
            }
            if properties[computedName] != nil {
                throw KVOError(.badRequest, "\(computedContext): the name is also a stored property")
            }
            computed[computedName] = try ComputedPropertySpec(name: computedName, json: entryJSON,
                                                             context: computedContext)
        }
        self.name = name
        self.properties = properties
        self.computed = computed
    }

    /// The canonical JSON form (what `classes` lists and what is persisted): every member present,
    /// computed entries in their object form. `init(json: def.json)` gives an equal definition.
    var json: JSONValue {
        [
            "name": .string(name),
            "properties": .object(properties.mapValues(\.json)),
            "computed": .object(computed.mapValues(\.json)),
        ]
    }

    /// What is wrong with a class name, completing "class name 'x' ..."; nil for a valid one:
    /// 1-128 bytes of `[A-Za-z_][A-Za-z0-9_]*`.
    static func classNameProblem(_ name: String) -> String? {
        func isLetter(_ byte: UInt8) -> Bool {
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || byte == UInt8(ascii: "_")
        }
        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        let bytes = name.utf8
        guard let first = bytes.first, bytes.count <= maximumNameLength, isLetter(first),
              bytes.allSatisfy({ isLetter($0) || isDigit($0) })
        else {
            return "must be 1 to \(maximumNameLength) bytes of letters, digits and '_', not starting with a digit"
        }
        return nil
    }

    /// What is wrong with a property or computed property name, completing "the name ..."; nil for a
    /// valid one: a single key of a key path (non-empty, at most 128 bytes, no `.`, not starting with `@`
    /// or `$`, not all digits).
    static func keyNameProblem(_ name: String) -> String? {
        if name.isEmpty { return "must not be empty" }
        if name.utf8.count > maximumNameLength { return "is longer than \(maximumNameLength) bytes" }
        if name.contains(".") { return "must not contain '.'" }
        if name.hasPrefix("@") || name.hasPrefix("$") { return "must not start with '@' or '$'" }
        if name.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            return "must not be all digits"
        }
        return nil
    }

    /// An optional member that must be an object when present (`properties`, `computed`).
    private static func objectMember(_ members: [String: JSONValue], _ key: String,
                                     context: String) throws(KVOError) -> [String: JSONValue] {
        guard let value = members[key] else { return [:] }
        guard let object = value.objectValue else {
            throw KVOError(.badRequest, "\(context): '\(key)' must be an object")
        }
        return object
    }
}
