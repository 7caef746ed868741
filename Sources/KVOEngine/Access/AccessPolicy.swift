import KVOModel

/// A user's rules, compiled once for fast checks: exact ids in a dictionary, globs in a list.
/// `unrestricted` is open mode (no users defined, loopback only): everything allowed.
///
/// Immutable; built on the loop thread when a user authenticates or their rules change, and read
/// there by every permission check (docs/design.md, "Where permission checks happen").
public final class AccessPolicy: Sendable {
    /// The rules as given (for listings).
    public let rules: [AccessRule]
    /// Open mode: every permission on every object.
    public let isUnrestricted: Bool
    private let exact: [String: Permission]
    private let globs: [(ObjectIDPattern, Permission)]
    /// Permissions every id has (rules whose pattern is `*`).
    private let everywhere: Permission

    public static let unrestricted = AccessPolicy(rules: [], unrestricted: true)

    public convenience init(rules: [AccessRule]) {
        self.init(rules: rules, unrestricted: false)
    }

    private init(rules: [AccessRule], unrestricted: Bool) {
        self.rules = rules
        self.isUnrestricted = unrestricted
        var exact: [String: Permission] = [:]
        var globs: [(ObjectIDPattern, Permission)] = []
        var everywhere: Permission = []
        for rule in rules {
            if rule.objects.isExact {
                exact[rule.objects.text, default: []].formUnion(rule.allow)
            } else if rule.objects.text == "*" {
                everywhere.formUnion(rule.allow)
            } else {
                globs.append((rule.objects, rule.allow))
            }
        }
        self.exact = exact
        self.globs = globs
        self.everywhere = everywhere
    }

    /// What this policy allows on `objectID`: the union of every matching rule.
    public func permissions(for objectID: String) -> Permission {
        if isUnrestricted { return .all }
        var allowed = everywhere.union(exact[objectID] ?? [])
        if allowed == .all || globs.isEmpty { return allowed }
        var id = objectID
        id.withUTF8 { utf8 in
            for (pattern, permission) in globs where !allowed.isSuperset(of: permission) {
                if pattern.matches(utf8: utf8) { allowed.formUnion(permission) }
            }
        }
        return allowed
    }

    /// Every permission some rule allows on some object (the union of the rules).
    public var permissionsAnywhere: Permission {
        isUnrestricted ? .all : rules.reduce(into: Permission()) { $0.formUnion($1.allow) }
    }

    /// Whether `permission` is allowed on `objectID`.
    public func allows(_ permission: Permission, on objectID: String) -> Bool {
        permissions(for: objectID).isSuperset(of: permission)
    }

    /// Server-wide administration (defineClass, user management, other connections' details) needs
    /// `admin` on every object: a rule `{"objects":"*","allow":[…"admin"…]}`.
    public var isServerAdmin: Bool { isUnrestricted || everywhere.contains(.admin) }
}
