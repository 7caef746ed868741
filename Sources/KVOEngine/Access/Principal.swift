/// Who a connection acts for: the user it authenticated as (nil in open mode) and that user's
/// compiled rules.
///
/// Owned by the connection (`Connection.principal`); nil there until it authenticates when
/// authentication is required. Replaced, never mutated, when the user's rules change. Loop thread only.
public struct Principal: Sendable {
    /// The user name; nil in open mode.
    public let user: String?
    public let policy: AccessPolicy

    public init(user: String?, policy: AccessPolicy) {
        self.user = user
        self.policy = policy
    }

    /// Open mode: no user, everything allowed.
    public static let open = Principal(user: nil, policy: .unrestricted)
}
