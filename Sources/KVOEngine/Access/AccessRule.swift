import KVOJSON
import KVOModel

/// One line of a user's rules: the objects it names and what it allows on them. Rules only allow
/// (default deny); a user's permission on an object is the union of the rules that match its id.
///
/// Wire and storage form: `{"objects":"sensor-*","allow":["read","write"]}`. A value; any thread.
public struct AccessRule: Hashable, Sendable {
    public var objects: ObjectIDPattern
    public var allow: Permission

    public init(objects: ObjectIDPattern, allow: Permission) {
        self.objects = objects
        self.allow = allow
    }

    /// The rule as JSON (`{"objects":…,"allow":[…]}`).
    public var json: JSONValue {
        .object(["objects": .string(objects.text), "allow": .array(allow.nameList.map(JSONValue.string))])
    }

    /// Parses the JSON form; the message says what is wrong (for a `bad_request` reply or a usage error).
    public init(json: JSONValue) throws(AccessRuleError) {
        guard case let .object(fields) = json else { throw AccessRuleError("a rule is an object {\"objects\":…,\"allow\":[…]}") }
        for key in fields.keys where key != "objects" && key != "allow" {
            throw AccessRuleError("unknown field '\(PrintableText.escaped(key, limit: 64))' in a rule")
        }
        guard case let .string(text)? = fields["objects"] else { throw AccessRuleError("a rule needs 'objects', an id or glob") }
        let pattern: ObjectIDPattern
        do { pattern = try ObjectIDPattern(text) } catch {
            switch error {
            case .empty: throw AccessRuleError("'objects' is empty")
            case let .tooLong(limit): throw AccessRuleError("'objects' is longer than \(limit) bytes")
            }
        }
        guard case let .array(names)? = fields["allow"], !names.isEmpty else {
            throw AccessRuleError("a rule needs 'allow', a non-empty array of \"read\", \"write\", \"admin\"")
        }
        var allow: Permission = []
        for name in names {
            guard case let .string(text) = name, let permission = Permission(name: text) else {
                throw AccessRuleError("'allow' takes \"read\", \"write\" and \"admin\"")
            }
            allow.insert(permission)
        }
        self.init(objects: pattern, allow: allow)
    }

    /// Parses the command-line form `PATTERN=PERM[,PERM…]`, e.g. `sensor-*=read,write`.
    public init(argument: String) throws(AccessRuleError) {
        guard let equals = argument.lastIndex(of: "=") else {
            throw AccessRuleError("a rule is PATTERN=PERMISSIONS, e.g. 'sensor-*=read,write'")
        }
        let names = argument[argument.index(after: equals)...].split(separator: ",").map { JSONValue.string(String($0)) }
        try self.init(json: .object(["objects": .string(String(argument[..<equals])), "allow": .array(names)]))
    }
}

/// Why a rule could not be parsed. A value; any thread.
public struct AccessRuleError: Error, Equatable, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
}
