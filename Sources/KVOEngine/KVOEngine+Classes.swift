import KVOJSON
import KVOModel

/// Classes: definition, and the validation of every write to an object of a class (Cocoa's key-value
/// validation, enforced by the server). Loop thread only, as the engine.
extension KVOEngine {
    /// Defines a class (`defineClass`): checks the definition, compiles its computed properties and
    /// keeps it (persisted with the next commit batch). Returns its name. A class is never redefined
    /// (`exists`).
    public func defineClass(_ definition: JSONValue) throws(KVOError) -> String {
        // A definition is stored and listed (`classes`) like an object, and its defaults end up in objects.
        if definition.nestingDepth(upTo: StoredDepth.maximum) > StoredDepth.maximum {
            throw KVOError(.tooLarge, "the class definition nests deeper than \(StoredDepth.maximum) levels; the limit is \(StoredDepth.maximum)",
                           details: ["limit": .int(Int64(StoredDepth.maximum))])
        }
        // The defaults are checked against their patterns as one write's values are (one shared budget).
        let scratch = PatternMatchScratch.current
        scratch.beginWrite()
        defer { scratch.endWrite() }
        let compiled = try CompiledClass(try ClassDefinition(json: definition))
        // Counted against --max-memory as its canonical definition (what is stored and listed).
        let size = JSONWriter.encodedLength(of: compiled.definition.json)
        if classes[compiled.name] == nil { try checkQuota(growth: size) }
        try classes.add(compiled)
        storedBytes += size
        if recordsCommitBatches { uncommittedClasses[compiled.name] = compiled.definition.json }
        return compiled.name
    }

    /// Every class's canonical definition, sorted by name.
    public func classDefinitions() -> [JSONValue] {
        classes.all.map(\.definition.json)
    }

    /// The object a reference names as `access` may see it: `unreadable` (looked up no further) when it
    /// may not read it, else whether it exists and its class.
    func classOfObject(for access: ConnectionAccess?) -> ClassOfObject {
        let reader = access.flatMap { $0.isUnrestricted ? nil : $0 }
        return { [objects, classes] id in
            if let reader, !reader.allows(.read, on: id) { return .unreadable }
            guard let value = objects[id] else { return .missing }
            return .exists(className: classes.classOf(value)?.name)
        }
    }

    /// Runs a validation, turning a refusal into the protocol's error (`read_only` for a computed
    /// property, `invalid_value` naming the property and the rule otherwise).
    func validated<T>(_ check: () throws(ValidationFailure) -> T) throws(KVOError) -> T {
        // The pattern matches of one write share one budget (`CompiledPattern.matches`).
        let scratch = PatternMatchScratch.current
        scratch.beginWrite()
        defer { scratch.endWrite() }
        do {
            return try check()
        } catch {
            if error.rule == "readOnly" {
                throw KVOError(.readOnly, error.message, details: ["property": .string(error.property)])
            }
            throw KVOError(.invalidValue, error.message,
                           details: ["property": .string(error.property), "rule": .string(error.rule)])
        }
    }

    /// The refusal of any write to `$class` (`set`, `increment`, an array operation): it is set when the
    /// object is created, whatever the object holds.
    static let classKeyIsReadOnly = KVOError(
        .readOnly, "'\(ClassCatalog.classKey)' is set when the object is created and cannot be written",
        details: ["property": .string(ClassCatalog.classKey)])

    /// Checks a `set` of `value` at `location` (already resolved through references): the reserved
    /// `$class` key is read-only; on an object of a class, the property's rules apply.
    func checkWrite(at location: StoredLocation, value: JSONValue, access: ConnectionAccess?) throws(KVOError) {
        guard let property = location.path.first else { return }
        if property == ClassCatalog.classKey { throw KVOEngine.classKeyIsReadOnly }
        // Free-form objects (and servers without classes) pay no lookup on this path: it runs for every set.
        guard !classes.isEmpty, let stored = objects[location.object], let compiled = classes.classOf(stored) else { return }
        let definition = compiled.definition
        let classOf = classOfObject(for: access)
        if location.path.count == 1 {
            try validated { () throws(ValidationFailure) in try definition.validate(property: property, value: value, classOf: classOf) }
        } else {
            let inner = Array(location.path.dropFirst())
            try validated { () throws(ValidationFailure) in
                try definition.validateInnerWrite(property: property, innerPath: inner, value: value, classOf: classOf)
            }
        }
    }

    /// For an insert, removal or replacement on the array at `location`: the check to run on the
    /// elements put in and the resulting count once the mutation is applied (nil when the object has no
    /// class: nothing to check).
    ///
    /// The check runs inside the write, while `objects` is being modified, so it must not read `objects`
    /// (an exclusivity violation) nor hold a copy of it (every write would then copy the whole store): the
    /// classes of the objects that `added` may refer to are looked up now, from the mutation's values.
    func arrayRules(at location: StoredLocation, for mutation: CollectionMutation,
                    access: ConnectionAccess?) throws(KVOError)
        -> ((_ added: [JSONValue], _ count: Int) throws(KVOError) -> Void)? {
        guard !classes.isEmpty, let property = location.path.first, let stored = objects[location.object],
              let compiled = classes.classOf(stored) else { return nil }
        let definition = compiled.definition
        if location.path.count == 1 {
            let lookUp = classOfObject(for: access)
            var referenced: [String: ReferencedObject] = [:]
            for value in mutation.values {
                guard let id = value.referencedObject else { continue }
                referenced[id] = lookUp(id)
            }
            let classOf: ClassOfObject = { referenced[$0] ?? .missing }
            return { [self] added, count throws(KVOError) in
                try validated { () throws(ValidationFailure) in
                    try definition.validateArrayChange(property: property, newElements: added, resultingCount: count,
                                                       classOf: classOf)
                }
            }
        }
        // An array inside a property: only the property itself is checked (defined, not computed).
        let inner = Array(location.path.dropFirst())
        let classOf = classOfObject(for: access)
        try validated { () throws(ValidationFailure) in
            try definition.validateInnerWrite(property: property, innerPath: inner, value: .null, classOf: classOf)
        }
        return nil
    }
}
