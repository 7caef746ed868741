import KVOJSON
import KVOModel

/// A computed (read-only) property of a class: its expression, kept as text for the expression
/// language to evaluate, and the key paths it depends on. Owned by its `ClassDefinition`; immutable,
/// any thread.
struct ComputedPropertySpec: Sendable, Equatable {
    let name: String
    /// The expression text (`"L * 2.55"`), not interpreted here.
    let expression: String
    /// The key paths whose changes change the value, as declared (empty for the shorthand form).
    let dependsOn: [KeyPath]
}

extension ComputedPropertySpec {
    /// Parses a computed entry: an expression string, or `{"expression": String, "dependsOn": [String]}`
    /// (`dependsOn` optional). In an extension so that the memberwise initialiser stays. Errors are `bad_request` and start with `context`.
    init(name: String, json: JSONValue, context: String) throws(KVOError) {
        func error(_ what: String) -> KVOError { KVOError(.badRequest, "\(context): \(what)") }
        let expressionJSON: JSONValue?
        var dependsOn: [KeyPath] = []
        switch json {
        case .string:
            expressionJSON = json
        case let .object(members):
            if let unknown = members.keys.sorted().first(where: { $0 != "expression" && $0 != "dependsOn" }) {
                throw error("unknown member '\(unknown)' (known: expression, dependsOn)")
            }
            expressionJSON = members["expression"]
            if let dependsOnJSON = members["dependsOn"] {
                guard let paths = dependsOnJSON.arrayValue else {
                    throw error("'dependsOn' must be an array of key paths")
                }
                for path in paths {
                    guard let string = path.stringValue else {
                        throw error("'dependsOn' must be an array of key paths (got \(path.validationDescription))")
                    }
                    do {
                        dependsOn.append(try KeyPath(string))
                    } catch {
                        throw KVOError(.badRequest, "\(context): 'dependsOn': \(error.message)")
                    }
                }
            }
        default:
            throw error("must be an expression string or an object (got \(json.validationDescription))")
        }
        guard let expressionJSON else { throw error("'expression' is missing") }
        guard let expression = expressionJSON.stringValue, !expression.isEmpty else {
            throw error("'expression' must be a non-empty string")
        }
        self.name = name
        self.expression = expression
        self.dependsOn = dependsOn
    }

    /// The canonical JSON form, always the object form.
    var json: JSONValue {
        ["expression": .string(expression), "dependsOn": .array(dependsOn.map { .string($0.string) })]
    }
}
