import KVOJSON
import KVOModel

/// One end of a binding: a key path of an object.
public struct BindingEndpoint: Equatable, Sendable, CustomStringConvertible {
    public let object: String
    public let keyPath: KeyPath

    public init(object: String, keyPath: KeyPath) {
        self.object = object
        self.keyPath = keyPath
    }

    /// `{"object": …, "keyPath": …}`, as requests carry it.
    var json: JSONValue {
        .object(["object": .string(object), "keyPath": .string(keyPath.string)])
    }

    /// Reads `{"object": …, "keyPath": …}`, nothing else (another member is `bad_request` naming it); `name` is the
    /// field it came from, for messages.
    init(json: JSONValue, name: String) throws(KVOError) {
        guard case let .object(members) = json else {
            throw KVOError(.badRequest, "'\(name)' must be an object with 'object' and 'keyPath', not \(json.typeName)")
        }
        if let unknown = members.keys.sorted().first(where: { $0 != "object" && $0 != "keyPath" }) {
            throw KVOError(.badRequest, NameSuggestion.unknownField(unknown, among: ["object", "keyPath"], where: " in '\(name)'"),
                           details: ["field": .string("\(name).\(unknown)")])
        }
        guard case let .string(object)? = members["object"], !object.isEmpty else {
            throw KVOError(.badRequest, "'\(name).object' must be a non-empty string")
        }
        guard object.utf8.count <= ObjectID.maximumLength else {
            throw KVOError(.badRequest, "'\(name).object' is longer than \(ObjectID.maximumLength) bytes")
        }
        guard case let .string(keyPath)? = members["keyPath"] else {
            throw KVOError(.badRequest, "'\(name).keyPath' must be a string")
        }
        self.init(object: object, keyPath: try KeyPath(keyPath))
    }

    public var description: String { "\(object):\(keyPath)" }
}

/// A binding as a client defines it (YJSafeKVO's bindTo/boundTo and combineLatest/reduce, kept on the
/// server): when a source's value changes, write a value to the target.
///
/// - `bind`: one source; its value, if `filter` lets it through, is written (through `convert` when
///   given) to the target.
/// - `combineLatest`: several sources; whenever one changes, `reduce` over the current values of all
///   of them (`$0`, `$1`, …) is written to the target, if `filter` lets it through.
///
/// Expressions are kept as text here; the engine compiles them (`CompiledBinding`). A value type; any
/// thread. Its `json` is what `bindings` lists and what the persistent store keeps.
public struct BindingSpec: Equatable, Sendable {
    public enum Kind: String, Sendable {
        case bind
        case combineLatest
    }

    /// Most sources one `combineLatest` may have.
    public static let maximumSources = 64

    public let kind: Kind
    public let sources: [BindingEndpoint]
    public let target: BindingEndpoint
    /// Expression over the incoming value(s); the write happens only when it is truthy.
    public let filter: String?
    /// `convert` (bind) or `reduce` (combineLatest): the value to write. A `bind` without `convert`
    /// writes the source value as it is; `combineLatest` requires `reduce`.
    public let transform: String?

    public init(kind: Kind, sources: [BindingEndpoint], target: BindingEndpoint, filter: String?, transform: String?) {
        self.kind = kind
        self.sources = sources
        self.target = target
        self.filter = filter
        self.transform = transform
    }

    /// Reads a definition from its members: those of a `bind` or `combineLatest` request, or a stored
    /// definition (`json`). `field` looks a member up.
    package init(kind: Kind, field: (String) -> JSONValue?) throws(KVOError) {
        func expressionText(_ name: String) throws(KVOError) -> String? {
            guard let value = field(name), value != .null else { return nil }
            guard case let .string(text) = value else {
                throw KVOError(.badRequest, "'\(name)' must be an expression (a string), not \(value.typeName)")
            }
            return text
        }
        guard let to = field("to") else { throw KVOError(.badRequest, "missing 'to'") }
        let target = try BindingEndpoint(json: to, name: "to")
        switch kind {
        case .bind:
            guard let from = field("from") else { throw KVOError(.badRequest, "missing 'from'") }
            self.init(kind: .bind, sources: [try BindingEndpoint(json: from, name: "from")], target: target,
                      filter: try expressionText("filter"), transform: try expressionText("convert"))
        case .combineLatest:
            guard case let .array(list)? = field("sources"), !list.isEmpty else {
                throw KVOError(.badRequest, "'sources' must be a non-empty array of {\"object\", \"keyPath\"}")
            }
            guard list.count <= BindingSpec.maximumSources else {
                throw KVOError(.badRequest, "'sources' has more than \(BindingSpec.maximumSources) entries")
            }
            var sources: [BindingEndpoint] = []
            for (index, item) in list.enumerated() {
                sources.append(try BindingEndpoint(json: item, name: "sources.\(index)"))
            }
            guard let reduce = try expressionText("reduce") else { throw KVOError(.badRequest, "missing 'reduce'") }
            self.init(kind: .combineLatest, sources: sources, target: target, filter: try expressionText("filter"),
                      transform: reduce)
        }
    }

    /// Reads a stored definition (`json`).
    init(json: JSONValue) throws(KVOError) {
        guard case let .object(members) = json, case let .string(kindName)? = members["kind"],
              let kind = Kind(rawValue: kindName) else {
            throw KVOError(.badRequest, "a binding definition must be an object with 'kind' bind or combineLatest")
        }
        try self.init(kind: kind) { members[$0] }
    }

    /// The canonical definition: `{"kind", "from" | "sources", "to", "filter"?, "convert" | "reduce"?}`.
    var json: JSONValue {
        var members: [String: JSONValue] = ["kind": .string(kind.rawValue), "to": target.json]
        switch kind {
        case .bind:
            members["from"] = sources[0].json
            if let transform { members["convert"] = .string(transform) }
        case .combineLatest:
            members["sources"] = .array(sources.map(\.json))
            if let transform { members["reduce"] = .string(transform) }
        }
        if let filter { members["filter"] = .string(filter) }
        return .object(members)
    }
}
