import KVOEngine

/// Each user's rules compiled (`AccessPolicy`), made at the first login or binding application that needs them
/// and kept until the user's rules change (`Server.policyDidChange(forUser:)`, user administration, a users file
/// reloaded, a snapshot installed, a roll-back): rules are compiled once per user, and every connection of the
/// user shares the one policy.
///
/// Owned by `Server` (a value stored in it); loop thread only.
struct CompiledPolicies {
    private var byUser: [String: AccessPolicy] = [:]

    /// `user`'s rules in `users`, compiled once (nil: no such user).
    mutating func policy(ofUser user: String, in users: UserDirectory) -> AccessPolicy? {
        if let compiled = byUser[user] { return compiled }
        guard let record = users.user(named: user) else { return nil }
        let compiled = AccessPolicy(rules: record.rules)
        byUser[user] = compiled
        return compiled
    }

    /// `user`'s rules changed, or the user is gone: compiled again when next asked for.
    mutating func forget(_ user: String) {
        byUser[user] = nil
    }

    /// The users were replaced: every policy is compiled again when next asked for.
    mutating func forgetAll() {
        byUser.removeAll()
    }
}
