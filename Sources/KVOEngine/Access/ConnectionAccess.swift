import KVOJSON
import KVOModel

/// What one connection may do, asked once per object and remembered: the connection's `Principal`
/// and a small cache of object id -> `Permission` computed from its compiled `AccessPolicy`.
///
/// One per connection (`Connection.access`), shared by reference with the engine's observations of
/// that connection (`Observation.access`), so a principal replaced here (`replace(_:)`) is what every
/// later check of the connection sees. In open mode (`AccessPolicy.unrestricted`) every check is one
/// load of `isUnrestricted` and no cache is kept. The cache holds at most `cacheCapacity` ids and is
/// emptied when full and whenever the principal changes; the most recent id is also kept apart, so a
/// run of requests on one object (the common case) compares one string and hashes nothing.
/// Loop thread only.
public final class ConnectionAccess {
    // Checked on every request: exempt from dynamic exclusivity checks (loop thread only, one call at a
    // time), which cost more than the checks themselves (perf: swift_beginAccess per property read).
    /// Who the connection acts for now.
    @exclusivity(unchecked) public private(set) var principal: Principal
    /// Open mode: every check passes without looking anything up.
    @exclusivity(unchecked) public private(set) var isUnrestricted: Bool
    @exclusivity(unchecked) private var cache: [String: Permission] = [:]
    /// The last object asked about (meaningful while `hasLast`) and its answer.
    @exclusivity(unchecked) private var lastObject = ""
    @exclusivity(unchecked) private var hasLast = false
    @exclusivity(unchecked) private var lastPermission: Permission = []

    /// Most object ids remembered before the cache is emptied and starts again.
    public static let cacheCapacity = 4096

    public init(_ principal: Principal) {
        self.principal = principal
        self.isUnrestricted = principal.policy.isUnrestricted
    }

    /// Open mode (no user): everything allowed.
    public static func open() -> ConnectionAccess { ConnectionAccess(.open) }

    /// No user and no rules: nothing allowed (a connection that has not authenticated).
    public static let nobody = Principal(user: nil, policy: AccessPolicy(rules: []))

    /// Replaces the principal (login, or the user's rules changed) and forgets every cached answer.
    public func replace(_ principal: Principal) {
        self.principal = principal
        isUnrestricted = principal.policy.isUnrestricted
        cache.removeAll()
        hasLast = false
        lastObject = ""
        lastPermission = []
    }

    /// The user name (nil in open mode).
    public var user: String? { principal.user }

    /// Whether the user administers the whole server (`admin` on `*`, or open mode).
    public var isServerAdmin: Bool { isUnrestricted || principal.policy.isServerAdmin }
    /// Every permission the user has on some object (`AccessPolicy.permissionsAnywhere`).
    public var permissionsAnywhere: Permission { isUnrestricted ? .all : principal.policy.permissionsAnywhere }

    /// What the connection may do to `object` (cached).
    public func permissions(on object: String) -> Permission {
        if isUnrestricted { return .all }
        if hasLast && lastObject == object { return lastPermission }
        let permission: Permission
        if let cached = cache[object] {
            permission = cached
        } else {
            permission = principal.policy.permissions(for: object)
            if cache.count >= ConnectionAccess.cacheCapacity { cache.removeAll(keepingCapacity: true) }
            cache[object] = permission
        }
        lastObject = object
        hasLast = true
        lastPermission = permission
        return permission
    }

    /// Whether the connection has `permission` on `object`.
    @inline(__always)
    public func allows(_ permission: Permission, on object: String) -> Bool {
        isUnrestricted || permissions(on: object).isSuperset(of: permission)
    }

    /// Throws `forbidden` unless the connection has `permission` on `object`.
    @inline(__always)
    public func require(_ permission: Permission, on object: String) throws(KVOError) {
        guard !allows(permission, on: object) else { return }
        throw ConnectionAccess.forbidden(permission, on: object, user: principal.user)
    }

    /// Throws `forbidden` unless every object `locations` name is readable (a reading's dependencies:
    /// the objects a key path passed through, across references, operators and computed properties).
    func requireRead(_ locations: [StoredLocation]) throws(KVOError) {
        if isUnrestricted { return }
        for location in locations { try require(.read, on: location.object) }
    }

    /// Whether every object `locations` name is readable.
    func allowsRead(_ locations: [StoredLocation]) -> Bool {
        if isUnrestricted { return true }
        return locations.allSatisfy { allows(.read, on: $0.object) }
    }

    /// Throws `forbidden` unless the connection administers the whole server.
    public func requireServerAdmin(_ what: String) throws(KVOError) {
        guard !isServerAdmin else { return }
        throw KVOError(.forbidden, "\(what) needs 'admin' on every object ('*')\(ConnectionAccess.asUser(principal.user))")
    }

    /// The `forbidden` error for `permission` on `object`.
    static func forbidden(_ permission: Permission, on object: String, user: String?) -> KVOError {
        KVOError(.forbidden, "'\(permission)' on object '\(PrintableText.escaped(object, limit: 64))' is not allowed\(asUser(user))",
                 details: ["object": .string(object), "permission": .string(permission.description)])
    }

    private static func asUser(_ user: String?) -> String {
        user.map { " for user '\(PrintableText.escaped($0, limit: 64))'" } ?? ""
    }
}
