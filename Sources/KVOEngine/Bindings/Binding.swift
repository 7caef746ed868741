import KVOJSON
import KVOModel

/// A binding in force: its definition, its compiled expressions, and the watched paths of its sources.
///
/// Expressions of a binding read only its incoming values, never key paths: `$value` (or `$0`) for a
/// `bind`, `$0` … `$n-1` for a `combineLatest` of n sources. Owned by `KVOEngine`; loop thread only.
final class Binding {
    let id: UInt64
    let spec: BindingSpec
    let filter: Expression?
    /// `convert` or `reduce`; nil: write the (single) source value as it is.
    let transform: Expression?
    /// The connection that created it, told when the binding is removed or one of its writes is refused;
    /// nil for bindings restored from disk.
    let creator: ConnectionID?
    /// The user who created it (nil: made in open mode, or before bindings recorded it). Kept with the
    /// definition on disk (`storedJSON`); every application runs with this user's current rights.
    let creatorUser: String?
    /// The creator's rights as last looked up (`KVOEngine.creatorPolicy`), with their per-object cache;
    /// replaced when the lookup returns another policy.
    var creatorAccess: ConnectionAccess?
    /// The watched path of each source, in `spec.sources` order (set by the engine when attached).
    var sourcePaths: [WatchedPath] = []
    /// Times applied during the current request (the engine's loop guard).
    var appliedInRequest = 0

    /// Compiles the definition's expressions: a parse error, a key path, or a variable the binding does
    /// not provide is `invalid_expression` naming the field and the column.
    init(id: UInt64, spec: BindingSpec, creator: ConnectionID?, creatorUser: String? = nil) throws(KVOError) {
        self.id = id
        self.spec = spec
        self.creator = creator
        self.creatorUser = creatorUser
        let allowed = Binding.variableNames(for: spec)
        filter = try spec.filter.map { text throws(KVOError) in try Binding.compile(text, field: "filter", allowed: allowed) }
        let transformField = spec.kind == .bind ? "convert" : "reduce"
        transform = try spec.transform.map { text throws(KVOError) in
            try Binding.compile(text, field: transformField, allowed: allowed)
        }
    }

    /// The variables an expression of `spec` may use.
    private static func variableNames(for spec: BindingSpec) -> Set<String> {
        switch spec.kind {
        case .bind: return ["value", "0"]
        case .combineLatest: return Set((0..<spec.sources.count).map(String.init))
        }
    }

    private static func compile(_ text: String, field: String, allowed: Set<String>) throws(KVOError) -> Expression {
        let expression: Expression
        do {
            expression = try Expression.parse(text)
        } catch {
            throw KVOError(.invalidExpression, "'\(field)': \(error)",
                           details: ["field": .string(field), "column": .int(Int64(error.column))])
        }
        if let path = expression.keyPaths.first {
            throw KVOError(.invalidExpression,
                           "'\(field)': a binding's expression reads only its incoming values ($value, $0, …), not key paths such as '\(path)'; use combineLatest to read more sources",
                           details: ["field": .string(field), "column": .int(Int64(expression.column(of: path.string)))])
        }
        if let unknown = expression.variables.subtracting(allowed).sorted().first {
            let names = allowed.sorted().map { "$" + $0 }.joined(separator: ", ")
            throw KVOError(.invalidExpression, "'\(field)': unknown variable '$\(unknown)' (this binding provides \(names))",
                           details: ["field": .string(field), "column": .int(Int64(expression.column(of: "$" + unknown)))])
        }
        return expression
    }

    /// The variables the expressions see, given each source's current value.
    func variables(values: [JSONValue]) -> [String: JSONValue] {
        switch spec.kind {
        case .bind: return ["value": values[0], "0": values[0]]
        case .combineLatest:
            var variables: [String: JSONValue] = [:]
            for (index, value) in values.enumerated() { variables[String(index)] = value }
            return variables
        }
    }

    /// The definition with its id (and its creator's user name, when it has one), as `bindings` lists it.
    var listing: JSONValue {
        guard case var .object(members) = storedJSON else { return spec.json }
        members["binding"] = .int(Int64(id))
        return .object(members)
    }

    /// What the persistent store keeps: the definition, with `creator` (the user name) when there is
    /// one. `BindingSpec(json:)` ignores the extra member, so no schema change was needed.
    var storedJSON: JSONValue {
        guard let creatorUser, case var .object(members) = spec.json else { return spec.json }
        members["creator"] = .string(creatorUser)
        return .object(members)
    }

    /// The creator's user name in a stored definition (nil when absent).
    static func creatorUser(inStored json: JSONValue) -> String? {
        guard case let .object(members) = json, case let .string(user)? = members["creator"] else { return nil }
        return user
    }
}
