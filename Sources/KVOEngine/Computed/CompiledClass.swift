import KVOModel

/// A computed property ready to evaluate: its parsed expression and the extra key paths it depends on.
/// Immutable; any thread.
struct CompiledComputedProperty: Sendable {
    let name: String
    let expression: Expression
    /// Key paths read only to depend on them (`dependsOn`, Cocoa's keyPathsForValuesAffecting…).
    let dependsOn: [KeyPath]
}

/// A class definition with its computed properties compiled. Immutable; any thread.
struct CompiledClass: Sendable {
    let definition: ClassDefinition
    let computed: [String: CompiledComputedProperty]

    var name: String { definition.name }

    /// Parses every computed property's expression (`invalid_expression`, naming the property and the
    /// column; also for a binding variable such as `$value`, which a computed property has none of) and
    /// refuses computed properties that read each other in a cycle (`cycle`).
    init(_ definition: ClassDefinition) throws(KVOError) {
        var computed: [String: CompiledComputedProperty] = [:]
        // In name order: which property a refusal names must not depend on hashing (cluster nodes apply the same definitions).
        for (name, spec) in definition.computed.sorted(by: { $0.key < $1.key }) {
            let expression: Expression
            do {
                expression = try Expression.parse(spec.expression)
            } catch {
                throw KVOError(.invalidExpression,
                               "class '\(definition.name)': computed property '\(name)': \(error)",
                               details: ["property": .string(name), "column": .int(Int64(error.column))])
            }
            // Variables belong to bindings ($value, $0, …): a computed property has none to give, and
            // would always read null.
            if let variable = expression.variables.sorted().first {
                throw KVOError(.invalidExpression,
                               "class '\(definition.name)': computed property '\(name)': at column \(expression.column(of: "$" + variable)): variables such as '$\(variable)' belong to bindings; a computed property reads key paths of its object",
                               details: ["property": .string(name),
                                         "column": .int(Int64(expression.column(of: "$" + variable)))])
            }
            computed[name] = CompiledComputedProperty(name: name, expression: expression, dependsOn: spec.dependsOn)
        }
        self.definition = definition
        self.computed = computed
        if let cycle = CompiledClass.findCycle(in: computed) {
            throw KVOError(.cycle, "class '\(definition.name)': computed properties read each other in a cycle: "
                                 + cycle.joined(separator: " -> "))
        }
    }

    /// A cycle among computed properties that read each other directly (first key of a key path they
    /// read or depend on), as the names along it; nil when there is none. Reads through references
    /// cannot be checked here (the objects are not known); they are bounded when evaluated.
    private static func findCycle(in computed: [String: CompiledComputedProperty]) -> [String]? {
        func reads(_ property: CompiledComputedProperty) -> [String] {
            (property.expression.keyPaths + property.dependsOn).compactMap { path in
                computed[path.components[0]] != nil ? path.components[0] : nil
            }
        }
        var state: [String: Bool] = [:]  // false: on the current path; true: done
        var path: [String] = []
        func visit(_ name: String) -> [String]? {
            if let done = state[name] {
                if done { return nil }
                return Array(path[path.firstIndex(of: name)!...]) + [name]
            }
            state[name] = false
            path.append(name)
            for next in reads(computed[name]!).sorted() {
                if let cycle = visit(next) { return cycle }
            }
            path.removeLast()
            state[name] = true
            return nil
        }
        for name in computed.keys.sorted() {
            if let cycle = visit(name) { return cycle }
        }
        return nil
    }
}
